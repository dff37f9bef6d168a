DROP TRIGGER documents_row_version ON documents;
DROP FUNCTION quire_documents_row_version();
ALTER TABLE documents DROP COLUMN row_version;
DROP TABLE idempotency_keys;
