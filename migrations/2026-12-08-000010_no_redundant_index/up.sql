-- document_versions_tenant_idx (tenant_id) is the leading part of
-- document_versions_tenant_sha256_idx (tenant_id, sha256): every lookup by tenant (a
-- tenant's wipe, the foreign key to tenants) can use the wider one, and each upload no
-- longer writes an entry that serves none (api/tests/it/migrations.rs checks for more).
-- Dropping an index takes its table's lock only for the moment of the catalogue change.
DROP INDEX IF EXISTS document_versions_tenant_idx;
