-- A number every change of the pane raises (the prompt, its version, the suggestion, the settings, the pins,
-- the model's waiting values), whoever made it: a page sends the revision it shows with each change, and a
-- change made from an older one is refused instead of overwriting newer work. A trigger, so no write can forget it.
ALTER TABLE conversations ADD COLUMN pane_revision INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER conversations_pane_revision
AFTER UPDATE OF prompt, prompt_version_id, suggestion, settings, pinned, setting_suggestions ON conversations
WHEN OLD.prompt IS NOT NEW.prompt
  OR OLD.prompt_version_id IS NOT NEW.prompt_version_id
  OR OLD.suggestion IS NOT NEW.suggestion
  OR OLD.settings IS NOT NEW.settings
  OR OLD.pinned IS NOT NEW.pinned
  OR OLD.setting_suggestions IS NOT NEW.setting_suggestions
BEGIN
  UPDATE conversations SET pane_revision = OLD.pane_revision + 1 WHERE id = NEW.id;
END;
