CREATE INDEX IF NOT EXISTS document_versions_tenant_idx ON document_versions (tenant_id);
