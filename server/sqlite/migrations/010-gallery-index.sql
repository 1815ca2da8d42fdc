-- The gallery lists every conversation's images newest first (created_at, then the order they were stored in):
-- with this index a page is read in that order, 60 rows, instead of all of them sorted (5 000 images: ~10 ms of
-- sorting on every page, far more on a busy machine). An index on created_at holds the rowid after it, so it
-- serves the tie-break and the `before` cursor, (created_at, rowid) < (?, ?), too.
CREATE INDEX images_by_time ON images (created_at);
