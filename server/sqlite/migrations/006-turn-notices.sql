-- What the user was told about a reply (a value clamped into range, a reply cut by the length limit) is
-- kept with its turn, so a reload shows it again: a JSON array of sentences, NULL when there are none.
ALTER TABLE turns ADD COLUMN notices TEXT;
