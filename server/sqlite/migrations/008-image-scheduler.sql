-- An image records the scheduler the backend really used (A1111's "Schedule type", ComfyUI's KSampler input,
-- sd-server's), as it does the sampler; NULL when the server did not say, and for every image made before.
ALTER TABLE images ADD COLUMN scheduler TEXT;
