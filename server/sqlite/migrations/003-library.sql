-- The conversation library and crash-safe turns.
-- Runs with foreign keys off (see migrate() in store.ts): the turns table is rebuilt to widen its status
-- CHECK, keeping every id, so images.turn_id still points at the same turns.

-- Conversations made by merely visiting a page (no message, image or prompt) are dropped.
DELETE FROM conversations
WHERE prompt = ''
  AND NOT EXISTS (SELECT 1 FROM turns WHERE turns.conversation_id = conversations.id)
  AND NOT EXISTS (SELECT 1 FROM images WHERE images.conversation_id = conversations.id);

-- A title the user gave; NULL means "from the first message".
ALTER TABLE conversations ADD COLUMN title TEXT;

-- The working context, one row per entry (was one JSON column rewritten every turn).
CREATE TABLE context_entries (
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  seq             INTEGER NOT NULL,
  entry           TEXT NOT NULL,          -- JSON ContextEntry
  PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;

INSERT INTO context_entries (conversation_id, seq, entry)
SELECT conversations.id, CAST(entries.key AS INTEGER), entries.value
FROM conversations, json_each(conversations.context) AS entries
WHERE json_valid(conversations.context) AND json_type(conversations.context) = 'array' AND entries.type = 'object';

ALTER TABLE conversations DROP COLUMN context;

-- running: the reply is being written (its text saved as it streams); interrupted: Easel stopped
-- before it ended (a crash); replaced: Regenerate or Edit asked again, the user saw this one.
CREATE TABLE turns_next (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
  text            TEXT NOT NULL,
  metadata        TEXT,
  status          TEXT NOT NULL DEFAULT 'ok'
                  CHECK (status IN ('ok', 'error', 'stopped', 'reset', 'running', 'interrupted', 'replaced')),
  error           TEXT,
  created_at      TEXT NOT NULL
);
INSERT INTO turns_next (id, conversation_id, role, text, metadata, status, error, created_at)
SELECT id, conversation_id, role, text, metadata, status, error, created_at FROM turns;
DROP TABLE turns;
ALTER TABLE turns_next RENAME TO turns;
CREATE INDEX turns_by_conversation ON turns (conversation_id, id);

CREATE INDEX conversations_by_activity ON conversations (updated_at);

-- Search: every message, and each conversation's title and prompt (FTS5, kept by triggers).
CREATE VIRTUAL TABLE turns_search USING fts5(
  text, content = 'turns', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO turns_search (turns_search) VALUES ('rebuild');
CREATE TRIGGER turns_search_insert AFTER INSERT ON turns BEGIN
  INSERT INTO turns_search (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER turns_search_delete AFTER DELETE ON turns BEGIN
  INSERT INTO turns_search (turns_search, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER turns_search_update AFTER UPDATE OF text ON turns BEGIN
  INSERT INTO turns_search (turns_search, rowid, text) VALUES ('delete', old.id, old.text);
  INSERT INTO turns_search (rowid, text) VALUES (new.id, new.text);
END;

CREATE VIRTUAL TABLE conversations_search USING fts5(
  conversation_id UNINDEXED, title, prompt, tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO conversations_search (conversation_id, title, prompt) SELECT id, coalesce(title, ''), prompt FROM conversations;
CREATE TRIGGER conversations_search_insert AFTER INSERT ON conversations BEGIN
  INSERT INTO conversations_search (conversation_id, title, prompt) VALUES (new.id, coalesce(new.title, ''), new.prompt);
END;
CREATE TRIGGER conversations_search_update AFTER UPDATE OF title, prompt ON conversations BEGIN
  DELETE FROM conversations_search WHERE conversation_id = old.id;
  INSERT INTO conversations_search (conversation_id, title, prompt) VALUES (new.id, coalesce(new.title, ''), new.prompt);
END;
CREATE TRIGGER conversations_search_delete AFTER DELETE ON conversations BEGIN
  DELETE FROM conversations_search WHERE conversation_id = old.id;
END;
