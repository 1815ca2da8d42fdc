-- An image records what the backend really used: a seed, steps or CFG the server ignored and did not
-- report is NULL instead of the value Easel asked for; the sampler is kept when the backend names it.
-- SQLite cannot drop NOT NULL in place, so the table is rebuilt (nothing references it).
CREATE TABLE images_v3 (
  id              TEXT PRIMARY KEY,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  turn_id         INTEGER REFERENCES turns(id) ON DELETE SET NULL,
  file            TEXT NOT NULL UNIQUE,
  prompt          TEXT NOT NULL,
  negative_prompt TEXT NOT NULL,
  steps           INTEGER,
  cfg             REAL,
  seed            INTEGER,
  sampler         TEXT,
  width           INTEGER NOT NULL,
  height          INTEGER NOT NULL,
  model           TEXT,
  created_at      TEXT NOT NULL
);
INSERT INTO images_v3 (id, conversation_id, turn_id, file, prompt, negative_prompt, steps, cfg, seed, sampler, width, height, model, created_at)
  SELECT id, conversation_id, turn_id, file, prompt, negative_prompt, steps, cfg, seed, NULL, width, height, model, created_at FROM images;
DROP TABLE images;
ALTER TABLE images_v3 RENAME TO images;
CREATE INDEX images_by_conversation ON images (conversation_id, created_at);
