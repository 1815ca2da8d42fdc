// How much an image backend may send. Larger answers are refused while reading, never buffered whole:
// a 150 MB answer once took the server to 1.2 GB.

/** The largest image accepted from a backend (the PNG itself, or a file it links to). */
export const MAX_IMAGE_BYTES = 64 * 1024 * 1024;

/** The same image as base64 inside a JSON answer (4 characters per 3 bytes), with 1 MB for the rest of the answer. */
export const MAX_IMAGE_JSON_BYTES = Math.ceil(MAX_IMAGE_BYTES / 3) * 4 + 1024 * 1024;

/** Any other answer of a backend (progress, history, queue, health); far more than any real one needs. */
export const MAX_BACKEND_ANSWER_BYTES = 4 * 1024 * 1024;

/** How much of an error answer is read to quote the backend's words. */
export const MAX_ERROR_TEXT_BYTES = 64 * 1024;
