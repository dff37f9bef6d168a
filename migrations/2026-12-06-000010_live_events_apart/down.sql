CREATE TABLE outbox_events_unpartitioned (
    id                uuid PRIMARY KEY,
    job_id            uuid NOT NULL,
    tenant_id         uuid NOT NULL,
    queue             text NOT NULL,
    message           jsonb NOT NULL,
    status            text NOT NULL CONSTRAINT outbox_events_status_check
                      CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'CANCELLED')),
    publish_attempts  integer NOT NULL DEFAULT 0
                      CONSTRAINT outbox_events_publish_attempts_check CHECK (publish_attempts >= 0),
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    claimed_at        timestamptz,
    claimed_by        text,
    broker_task_id    uuid,
    last_error        text
                      CONSTRAINT outbox_events_last_error_check CHECK (char_length(last_error) <= 500),
    published_at      timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    priority          text NOT NULL DEFAULT 'interactive'
);
INSERT INTO outbox_events_unpartitioned
SELECT id, job_id, tenant_id, queue, message, status, publish_attempts, next_attempt_at,
       claimed_at, claimed_by, broker_task_id, last_error, published_at, created_at, priority
FROM outbox_events;
DROP TABLE outbox_events;
ALTER TABLE outbox_events_unpartitioned RENAME TO outbox_events;
ALTER INDEX outbox_events_unpartitioned_pkey RENAME TO outbox_events_pkey;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES processing_jobs (id);
ALTER TABLE outbox_events
    ADD CONSTRAINT outbox_events_priority_check CHECK (priority IN ('interactive', 'bulk')) NOT VALID;
CREATE INDEX outbox_events_publishing_idx ON outbox_events (claimed_at) WHERE status = 'PUBLISHING';
CREATE INDEX outbox_events_delivered_idx ON outbox_events (created_at)
    WHERE status IN ('PUBLISHED', 'CANCELLED');
CREATE INDEX outbox_events_job_idx ON outbox_events (job_id);
CREATE INDEX outbox_events_tenant_idx ON outbox_events (tenant_id);
CREATE INDEX outbox_events_fair_idx
    ON outbox_events (queue, priority, tenant_id, next_attempt_at) WHERE status = 'PENDING';
CREATE TRIGGER outbox_events_message_immutable
    BEFORE UPDATE OF message ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION outbox_events_message_immutable();
