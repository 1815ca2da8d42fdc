-- What the user typed is theirs: the prompt's history, pinned settings and the model's waiting suggestions.
-- Every change of the prompt (the user's or the model's) is a version; undo goes to a version's parent,
-- redo to its newest child. conversations.prompt stays the current text (the search indexes it).
CREATE TABLE prompt_versions (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  parent_id       INTEGER REFERENCES prompt_versions(id) ON DELETE SET NULL,
  prompt          TEXT NOT NULL,
  source          TEXT NOT NULL CHECK (source IN ('user', 'model', 'suggestion', 'earlier')),
  turn_id         INTEGER REFERENCES turns(id) ON DELETE SET NULL,
  created_at      TEXT NOT NULL
);
CREATE INDEX prompt_versions_by_conversation ON prompt_versions (conversation_id, id);
CREATE INDEX prompt_versions_by_parent ON prompt_versions (parent_id);

ALTER TABLE conversations ADD COLUMN prompt_version_id INTEGER REFERENCES prompt_versions(id) ON DELETE SET NULL;
-- JSON { prompt, turnId }: the model's prompt waiting beside an edit made while its reply was written.
ALTER TABLE conversations ADD COLUMN suggestion TEXT;
-- JSON array: the settings set by hand (steps, cfg, seed, negativePrompt); the model never overwrites them.
ALTER TABLE conversations ADD COLUMN pinned TEXT NOT NULL DEFAULT '[]';
-- JSON object: the model's different values for pinned settings.
ALTER TABLE conversations ADD COLUMN setting_suggestions TEXT NOT NULL DEFAULT '{}';
-- JSON { reason, message }: the reply said its prompt was ready and no image was made.
ALTER TABLE turns ADD COLUMN image_note TEXT;
-- The prompt version an image was made from.
ALTER TABLE images ADD COLUMN prompt_version_id INTEGER REFERENCES prompt_versions(id) ON DELETE SET NULL;

-- The prompt each conversation has now is its first version.
INSERT INTO prompt_versions (conversation_id, parent_id, prompt, source, turn_id, created_at)
  SELECT id, NULL, prompt, 'earlier', NULL, updated_at FROM conversations WHERE prompt != '' ORDER BY rowid;
UPDATE conversations SET prompt_version_id = (SELECT max(v.id) FROM prompt_versions v WHERE v.conversation_id = conversations.id);
