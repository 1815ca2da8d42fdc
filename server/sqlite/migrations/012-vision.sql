-- The vision model (Check, Describe) writes prompts of its own: a version taken from it has source 'vision'.
-- SQLite cannot change a CHECK, so prompt_versions is rebuilt (foreign keys are off while migrations run, and
-- checked before commit: open.ts), its rows and ids kept, so every reference to a version stays as it was.
CREATE TABLE prompt_versions_new (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  parent_id       INTEGER REFERENCES prompt_versions(id) ON DELETE SET NULL,
  prompt          TEXT NOT NULL,
  source          TEXT NOT NULL CHECK (source IN ('user', 'model', 'suggestion', 'earlier', 'vision')),
  turn_id         INTEGER REFERENCES turns(id) ON DELETE SET NULL,
  created_at      TEXT NOT NULL
);
INSERT INTO prompt_versions_new (id, conversation_id, parent_id, prompt, source, turn_id, created_at)
  SELECT id, conversation_id, parent_id, prompt, source, turn_id, created_at FROM prompt_versions;
-- The ids of versions deleted since are not given out again either.
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'prompt_versions'))
  WHERE name = 'prompt_versions_new';
DROP TABLE prompt_versions;
ALTER TABLE prompt_versions_new RENAME TO prompt_versions;
CREATE INDEX prompt_versions_by_conversation ON prompt_versions (conversation_id, id);
CREATE INDEX prompt_versions_by_parent ON prompt_versions (parent_id);

-- What the vision model found when it checked a picture against what was asked: the elements it shows
-- (JSON array of strings), those missing or wrong with what the picture shows instead (JSON array of
-- { element, evidence }), and the prompt it proposes. Kept with the picture; they go with it.
CREATE TABLE image_checks (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  image_id        TEXT NOT NULL REFERENCES images(id) ON DELETE CASCADE,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  model           TEXT NOT NULL,
  matches         TEXT NOT NULL,
  misses          TEXT NOT NULL,
  revised_prompt  TEXT NOT NULL,
  created_at      TEXT NOT NULL
);
CREATE INDEX image_checks_by_conversation ON image_checks (conversation_id, id);
CREATE INDEX image_checks_by_image ON image_checks (image_id);
