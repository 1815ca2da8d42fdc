-- An image made from another one ("Vary", image-to-image) records where it came from: that image's id (in this
-- conversation or another; no foreign key, as it may be deleted later while this one stays) and the strength it
-- was changed with (0.05–1, A1111's denoising strength). Both NULL for an image made from the prompt alone, and
-- for every image made before.
ALTER TABLE images ADD COLUMN source_image_id TEXT;
ALTER TABLE images ADD COLUMN source_strength REAL;
