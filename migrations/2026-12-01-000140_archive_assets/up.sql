-- A scan's searchable archive copy (issue 18): a third kind of asset, a PDF of the pages
-- upright with their text laid invisibly over them. The CHECK is widened before any code
-- writes the new kind (migrations/README.md); every row satisfies it already.
ALTER TABLE assets DROP CONSTRAINT assets_kind_check;
ALTER TABLE assets ADD CONSTRAINT assets_kind_check
    CHECK (kind IN ('thumbnail', 'text', 'archive'));
