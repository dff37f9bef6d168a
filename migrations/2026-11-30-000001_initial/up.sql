-- Quire's initial schema: tenants, documents and their versions, processing jobs and
-- their outbox events. Statuses are text with CHECK constraints so that a new state is a
-- reviewed migration, and so that psql output stays readable for operators.

CREATE TABLE tenants (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 100),
    status      text NOT NULL CHECK (status IN ('creating', 'active', 'suspended', 'deleting')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE documents (
    id                  uuid PRIMARY KEY,
    tenant_id           uuid NOT NULL REFERENCES tenants (id),
    title               text NOT NULL CHECK (char_length(title) <= 500),
    status              text NOT NULL DEFAULT 'PENDING'
                        CHECK (status IN ('PENDING', 'PROCESSING', 'READY', 'FAILED')),
    processing_error    text CHECK (char_length(processing_error) <= 500),
    current_version_id  uuid,
    issued_at           date,
    trashed_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX documents_tenant_created_idx ON documents (tenant_id, created_at DESC, id DESC);

CREATE TABLE document_versions (
    id                 uuid PRIMARY KEY,
    document_id        uuid NOT NULL REFERENCES documents (id),
    tenant_id          uuid NOT NULL REFERENCES tenants (id),
    storage_key        text NOT NULL UNIQUE,
    size_bytes         bigint NOT NULL CHECK (size_bytes >= 0),
    sha256             text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    content_type       text NOT NULL,
    original_filename  text CHECK (char_length(original_filename) <= 255),
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_versions_document_idx ON document_versions (document_id);
CREATE INDEX document_versions_tenant_idx ON document_versions (tenant_id);

-- The document row is inserted before its first version in the same transaction, so the
-- pointer to the current version is checked at commit.
ALTER TABLE documents
    ADD CONSTRAINT documents_current_version_fk FOREIGN KEY (current_version_id)
    REFERENCES document_versions (id) DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX documents_current_version_idx ON documents (current_version_id);

-- Jobs reference their tenant and document WITHOUT foreign keys: a purge-document or
-- delete-tenant job outlives the rows it removes and keeps its audit record.
CREATE TABLE processing_jobs (
    id                uuid PRIMARY KEY,
    tenant_id         uuid NOT NULL,
    document_id       uuid,
    job_type          text NOT NULL,
    payload           jsonb NOT NULL DEFAULT '{}'::jsonb,
    status            text NOT NULL
                      CHECK (status IN ('QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    attempts          integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts      integer NOT NULL CHECK (max_attempts >= 1),
    current_event_id  uuid,
    worker_id         text,
    last_task_id      uuid,
    lease_expires_at  timestamptz,
    heartbeat_at      timestamptz,
    queued_at         timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    error_code        text CHECK (char_length(error_code) <= 64),
    error_message     text CHECK (char_length(error_message) <= 500),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX processing_jobs_tenant_idx ON processing_jobs (tenant_id);
CREATE INDEX processing_jobs_document_idx ON processing_jobs (document_id, queued_at);
-- The rescuer scans running jobs by lease.
CREATE INDEX processing_jobs_running_lease_idx ON processing_jobs (lease_expires_at)
    WHERE status = 'RUNNING';
-- Lost-message recovery looks at queued jobs per type; retention at finished ones.
CREATE INDEX processing_jobs_queued_idx ON processing_jobs (job_type, queued_at)
    WHERE status = 'QUEUED';
CREATE INDEX processing_jobs_finished_idx ON processing_jobs (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED');
-- At most one active analyze job per document version: concurrent re-analyze requests
-- collide here instead of duplicating work.
CREATE UNIQUE INDEX processing_jobs_one_active_analyze_idx
    ON processing_jobs ((payload ->> 'document_version_id'))
    WHERE job_type = 'analyze-document' AND status IN ('QUEUED', 'RUNNING');

CREATE TABLE outbox_events (
    id                uuid PRIMARY KEY,
    job_id            uuid NOT NULL REFERENCES processing_jobs (id),
    tenant_id         uuid NOT NULL,
    queue             text NOT NULL,
    message           jsonb NOT NULL,
    status            text NOT NULL
                      CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'CANCELLED')),
    publish_attempts  integer NOT NULL DEFAULT 0 CHECK (publish_attempts >= 0),
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    claimed_at        timestamptz,
    claimed_by        text,
    broker_task_id    uuid,
    last_error        text CHECK (char_length(last_error) <= 500),
    published_at      timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now()
);
-- Keeps the dispatcher's poll cheap however many published events the table holds.
CREATE INDEX outbox_events_due_idx ON outbox_events (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX outbox_events_publishing_idx ON outbox_events (claimed_at) WHERE status = 'PUBLISHING';
CREATE INDEX outbox_events_delivered_idx ON outbox_events (created_at)
    WHERE status IN ('PUBLISHED', 'CANCELLED');
CREATE INDEX outbox_events_job_idx ON outbox_events (job_id);
CREATE INDEX outbox_events_tenant_idx ON outbox_events (tenant_id);

-- An event's message is what was promised to the broker: it never changes.
CREATE FUNCTION outbox_events_message_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.message IS DISTINCT FROM OLD.message THEN
        RAISE EXCEPTION 'outbox_events.message is immutable';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER outbox_events_message_immutable
    BEFORE UPDATE OF message ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION outbox_events_message_immutable();
