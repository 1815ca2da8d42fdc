CREATE TABLE conversations (
  id          TEXT PRIMARY KEY,
  created_at  TEXT NOT NULL,
  updated_at  TEXT NOT NULL,
  prompt      TEXT NOT NULL DEFAULT '',
  settings    TEXT NOT NULL,               -- JSON Settings
  pending     TEXT NOT NULL DEFAULT '{"promptEdited":false,"settingsChanged":false}',
  context     TEXT NOT NULL DEFAULT '[]'   -- JSON ContextEntry[]: the model's working context
);

CREATE TABLE turns (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
  text            TEXT NOT NULL,
  metadata        TEXT,                   -- JSON Metadata
  status          TEXT NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'error', 'stopped', 'reset')),
  error           TEXT,                   -- JSON { code, message }
  created_at      TEXT NOT NULL
);
CREATE INDEX turns_by_conversation ON turns (conversation_id, id);
