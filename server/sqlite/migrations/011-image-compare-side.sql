-- An image made by Compare keeps its side ('a' the first prompt version, 'b' the second), so a reload and every
-- other page draw the comparison in two columns, as the page that asked for it did. NULL for every other image,
-- and for every image made before (a comparison made then shows as one row, as it did).
ALTER TABLE images ADD COLUMN compare_side TEXT CHECK (compare_side IN ('a', 'b'));
