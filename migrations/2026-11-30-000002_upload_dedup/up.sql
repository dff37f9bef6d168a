-- Duplicate-upload detection looks up a tenant's versions by content hash.
CREATE INDEX document_versions_tenant_sha256_idx ON document_versions (tenant_id, sha256);
