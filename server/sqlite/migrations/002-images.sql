CREATE TABLE images (
  id              TEXT PRIMARY KEY,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  turn_id         INTEGER REFERENCES turns(id) ON DELETE SET NULL,
  file            TEXT NOT NULL UNIQUE,
  prompt          TEXT NOT NULL,
  negative_prompt TEXT NOT NULL,
  steps           INTEGER NOT NULL,
  cfg             REAL NOT NULL,
  seed            INTEGER NOT NULL,
  width           INTEGER NOT NULL,
  height          INTEGER NOT NULL,
  model           TEXT,
  created_at      TEXT NOT NULL
);
CREATE INDEX images_by_conversation ON images (conversation_id, created_at);
