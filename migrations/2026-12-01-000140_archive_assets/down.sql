-- The archive copies' rows go first; their objects, named by no row any more, are left to
-- the storage GC.
DELETE FROM assets WHERE kind = 'archive';
ALTER TABLE assets DROP CONSTRAINT assets_kind_check;
ALTER TABLE assets ADD CONSTRAINT assets_kind_check CHECK (kind IN ('thumbnail', 'text'));
