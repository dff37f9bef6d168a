DROP TABLE outbox_events;
DROP FUNCTION outbox_events_message_immutable();
DROP TABLE processing_jobs;
ALTER TABLE documents DROP CONSTRAINT documents_current_version_fk;
DROP TABLE document_versions;
DROP TABLE documents;
DROP TABLE tenants;
