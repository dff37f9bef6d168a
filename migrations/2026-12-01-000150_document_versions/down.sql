CREATE INDEX document_versions_document_idx ON document_versions (document_id);
DROP INDEX document_versions_document_number_idx;
ALTER TABLE document_versions
    DROP COLUMN findings_issued_at,
    DROP COLUMN findings_text,
    DROP COLUMN processing_error,
    DROP COLUMN status,
    DROP COLUMN number;
ALTER TABLE documents DROP COLUMN last_version_number;
