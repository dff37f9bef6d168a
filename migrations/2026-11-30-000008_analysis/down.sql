DROP FUNCTION quire_reindex_document(uuid);
DROP INDEX documents_search_idx;
ALTER TABLE documents DROP COLUMN search_vector;
ALTER TABLE documents DROP COLUMN content_text;
DROP TABLE assets;
