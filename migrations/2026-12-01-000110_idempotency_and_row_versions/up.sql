-- Safe retries at the edge (Idempotency-Key): one row per key and scope (a tenant, or an
-- operator for tenant creation), inserted by the request's own transaction before it
-- writes anything and completed with its answer before it commits. A concurrent request
-- with the same key blocks on the first's uncommitted row (the primary key) and then
-- reads its answer; a request that fails rolls its row back with everything else.
-- Rows expire after server.idempotency_ttl_seconds (expires_at) and are pruned by the
-- dispatcher's retention (db::idempotency::prune_expired).
CREATE TABLE idempotency_keys (
    scope text NOT NULL,
    key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    -- The tenant of a tenant scope (NULL for an operator's): its wipe removes its keys.
    tenant_id uuid REFERENCES tenants (id) ON DELETE CASCADE,
    -- SHA-256 of method, route and body: the same key with another request is refused.
    request_digest bytea NOT NULL,
    -- The first answer; NULL only inside the transaction that is still writing it.
    status smallint CHECK (status BETWEEN 100 AND 599),
    headers jsonb,
    body bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE INDEX idempotency_keys_tenant_idx ON idempotency_keys (tenant_id);
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);

-- Optimistic concurrency: the document's ETag is its row version. The trigger bumps it
-- in the very statement that changes anything a document view shows (title, status,
-- error, version, date, trash, correspondent, updated_at), whichever code path wrote it,
-- so no writer can forget; the search vector and the extracted text are not shown and
-- do not bump it. A statement that sets row_version itself (an edit that changes only
-- the tags, which live in another table) keeps its own value. Writes guarded by If-Match
-- compare it in their UPDATE's WHERE.
ALTER TABLE documents ADD COLUMN row_version bigint NOT NULL DEFAULT 1;

CREATE FUNCTION quire_documents_row_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.row_version = OLD.row_version
       AND (NEW.title, NEW.status, NEW.processing_error, NEW.current_version_id,
            NEW.issued_at, NEW.trashed_at, NEW.correspondent_id, NEW.updated_at)
           IS DISTINCT FROM
           (OLD.title, OLD.status, OLD.processing_error, OLD.current_version_id,
            OLD.issued_at, OLD.trashed_at, OLD.correspondent_id, OLD.updated_at) THEN
        NEW.row_version := OLD.row_version + 1;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER documents_row_version BEFORE UPDATE ON documents
    FOR EACH ROW EXECUTE FUNCTION quire_documents_row_version();
