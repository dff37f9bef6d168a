-- Tenancy: capability sets and members (permissions resolved per request), the tenant's
-- search index record, single-use nonces of signed administrative payloads, and the
-- partial unique indexes that keep one lifecycle job of a kind active per tenant.

-- Per tenant, the named sets `owner`, `user`, `readonly`, `webdav`, materialized by
-- provision-tenant from the catalogue in `shared` (so a tenant's sets can be edited
-- without touching another tenant).
CREATE TABLE capability_sets (
    tenant_id    uuid NOT NULL REFERENCES tenants (id),
    name         text NOT NULL CHECK (name IN ('owner', 'user', 'readonly', 'webdav')),
    permissions  text[] NOT NULL
                 CHECK (permissions <@ ARRAY['documents:read', 'documents:write', 'members:manage']),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE tenant_members (
    tenant_id       uuid NOT NULL REFERENCES tenants (id),
    user_id         uuid NOT NULL,
    capability_set  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id, capability_set) REFERENCES capability_sets (tenant_id, name)
);
CREATE INDEX tenant_members_capability_set_idx ON tenant_members (tenant_id, capability_set);

-- The tenant's search index. PostgreSQL full-text search keeps its index beside the
-- documents; this row is what provision-tenant ensures and delete-tenant drops, and
-- names the text search configuration the tenant's documents are indexed with.
CREATE TABLE search_indexes (
    tenant_id   uuid PRIMARY KEY REFERENCES tenants (id),
    language    text NOT NULL CHECK (char_length(language) BETWEEN 1 AND 63),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Signed administrative payloads are single-use. No foreign key: the nonce outlives the
-- tenant it deleted. `job_id` binds the nonce to the job that carries it, so a retry
-- of that job after a crash may proceed while any other job with the nonce may not.
CREATE TABLE used_nonces (
    nonce       text PRIMARY KEY CHECK (nonce ~ '^[0-9a-f]{32}$'),
    purpose     text NOT NULL,
    tenant_id   uuid NOT NULL,
    job_id      uuid NOT NULL,
    used_at     timestamptz NOT NULL DEFAULT now()
);

-- One active verification per document version, one active provisioning and one active
-- deletion per tenant: a second request returns (or collides with) the first.
CREATE UNIQUE INDEX processing_jobs_one_active_verify_idx
    ON processing_jobs ((payload ->> 'document_version_id'))
    WHERE job_type = 'verify-document' AND status IN ('QUEUED', 'RUNNING');
CREATE UNIQUE INDEX processing_jobs_one_active_tenant_job_idx
    ON processing_jobs (tenant_id, job_type)
    WHERE job_type IN ('provision-tenant', 'delete-tenant') AND status IN ('QUEUED', 'RUNNING');

-- Tenants that exist already get what provisioning would have given them: the four
-- capability sets (as `shared/src/permissions.rs` defines them) and a search index.
-- Members cannot be inferred from tokens; an operator names them with
-- `quire-admin tenant create --name NAME --owner USER --if-missing`.
INSERT INTO capability_sets (tenant_id, name, permissions)
SELECT t.id, s.name, s.permissions
FROM tenants t
CROSS JOIN (VALUES
    ('owner', ARRAY['documents:read', 'documents:write', 'members:manage']),
    ('user', ARRAY['documents:read', 'documents:write']),
    ('readonly', ARRAY['documents:read']),
    ('webdav', ARRAY['documents:read', 'documents:write'])
) AS s (name, permissions)
ON CONFLICT DO NOTHING;
INSERT INTO search_indexes (tenant_id, language)
SELECT id, 'simple' FROM tenants
ON CONFLICT DO NOTHING;
