-- The live events apart from the history (issue 19, item 5; docs/decisions.md, "Live
-- events apart from the history"). outbox_events becomes a table partitioned by status:
-- outbox_events_live holds what is still to be published (PENDING, PUBLISHING),
-- outbox_events_delivered what is done with (PUBLISHED, CANCELLED). Every statement
-- still names outbox_events; PostgreSQL routes each row to its partition and moves it
-- when its status crosses over (the mark published, a cancel).
--
-- Why: with 20 million delivered events in one heap, (1) the free space map sent each
-- new PENDING row into the tail of a history page (a cold page read, a dirty page and a
-- full-page image per new event), and (2) the due-event index's dead entries at a
-- drained backlog's head were vacuumed only when 20 % of the whole table was dead, so
-- every round walked them. Now a new event lands in the live partition's recent pages,
-- and the live partition is vacuumed by its own, small size.
--
-- A row moved to the other partition is not followed by a statement that was waiting
-- for it: PostgreSQL raises a serialization failure ("already moved to another
-- partition") instead of re-checking the guard. Every statement that writes live events
-- runs again on it (`db::moved`), and then finds its guard false, as it did before.
--
-- An id is unique within each partition (below); across the two, the uniqueness of an
-- event id is its UUIDv7's, as it was in practice (no statement inserts a given id
-- twice, and a row moves with its id). This migration copies the table under an exclusive lock: on a large
-- installation run retention first, and plan the copy's minutes.

CREATE TABLE outbox_events_partitioned (
    id                uuid NOT NULL,
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
                      CONSTRAINT outbox_events_priority_check CHECK (priority IN ('interactive', 'bulk'))
) PARTITION BY LIST (status);

CREATE TABLE outbox_events_live PARTITION OF outbox_events_partitioned
    FOR VALUES IN ('PENDING', 'PUBLISHING');
CREATE TABLE outbox_events_delivered PARTITION OF outbox_events_partitioned
    FOR VALUES IN ('PUBLISHED', 'CANCELLED');

-- Vacuumed by rows, not by a share of the history: every event passes through here and
-- leaves two dead versions (claimed, then moved out). A drained backlog's dead entries
-- at the head of outbox_events_fair_idx go at the next autovacuum round.
ALTER TABLE outbox_events_live SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000);

INSERT INTO outbox_events_partitioned
    (id, job_id, tenant_id, queue, message, status, publish_attempts, next_attempt_at,
     claimed_at, claimed_by, broker_task_id, last_error, published_at, created_at, priority)
SELECT id, job_id, tenant_id, queue, message, status, publish_attempts, next_attempt_at,
       claimed_at, claimed_by, broker_task_id, last_error, published_at, created_at, priority
FROM outbox_events;

DROP TABLE outbox_events;
ALTER TABLE outbox_events_partitioned RENAME TO outbox_events;

-- An event's id is unique in each partition, by a unique index of its own (no primary
-- key on the parent: PostgreSQL would require it to include the partition key, and a
-- key of (id, status) is not unique on id, so the planner estimated a lookup by id at
-- hundreds of rows of an idle-vacuumed live partition and scanned it whole).
CREATE UNIQUE INDEX outbox_events_live_pkey ON outbox_events_live (id);
CREATE UNIQUE INDEX outbox_events_delivered_pkey ON outbox_events_delivered (id);
-- No foreign key to processing_jobs any more: a row moved into the delivered partition
-- is an insert there, and its key check took KEY SHARE on the job row. The mark then
-- waited for any transaction holding the job FOR UPDATE (a worker's claim, a trash), and
-- deadlocked with a trash, which holds the document's jobs and waits for their events
-- (the test suite's deadlock log showed it). Every event is written by the statement
-- that writes or re-queues its job, and retention deletes a job's events before it.
CREATE INDEX outbox_events_job_idx ON outbox_events (job_id);
CREATE INDEX outbox_events_tenant_idx ON outbox_events (tenant_id);
-- The scheduler's head scan and the claim recovery's scan, on the live rows only.
CREATE INDEX outbox_events_fair_idx
    ON outbox_events_live (queue, priority, tenant_id, next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX outbox_events_publishing_idx
    ON outbox_events_live (claimed_at) WHERE status = 'PUBLISHING';
-- Retention's walk from the oldest delivered event.
CREATE INDEX outbox_events_delivered_idx
    ON outbox_events_delivered (created_at) WHERE status IN ('PUBLISHED', 'CANCELLED');

CREATE TRIGGER outbox_events_message_immutable
    BEFORE UPDATE OF message ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION outbox_events_message_immutable();

ANALYZE outbox_events;
