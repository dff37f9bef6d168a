ALTER TABLE documents DROP COLUMN correspondent_id;
DROP TABLE document_tags;
DROP TABLE tags;
DROP TABLE correspondents;
