-- The dispatcher is the scheduler (issue 16, items 1 and 2; docs/decisions.md, "Fair
-- share"). It publishes only a bounded number of messages per queue and picks the next
-- ones by priority class and weighted fair share among tenants.

-- The priority class of an event, set at enqueue from the job's origin (an upload, a
-- single re-analyze and an operator's retry are interactive; bulk re-analyze and verify
-- and scheduled scrubs are bulk) and carried over to the events that replace it (a
-- transient retry, a rescue, a lost message announced again). Constant default: no
-- table rewrite; the check holds for new rows at once (NOT VALID: no scan under lock).
ALTER TABLE outbox_events
    ADD COLUMN priority text NOT NULL DEFAULT 'interactive';
ALTER TABLE outbox_events
    ADD CONSTRAINT outbox_events_priority_check CHECK (priority IN ('interactive', 'bulk')) NOT VALID;

-- The scheduler's head scan: for each queue, class and tenant, its due events in due
-- order. Finding the tenants with due events skips from one tenant to the next along
-- this index, and claiming a tenant's next n events reads n entries, however long the
-- backlog. (On a large live table create it CONCURRENTLY by hand first.)
CREATE INDEX IF NOT EXISTS outbox_events_fair_idx
    ON outbox_events (queue, priority, tenant_id, next_attempt_at) WHERE status = 'PENDING';

-- The event whose publication a job's queued wait is in: set by mark-published in the
-- same statement that marks the event. A job is "in flight" (published, not yet
-- claimed) while it is QUEUED and this equals its current event; a claim (RUNNING) or a
-- new event (retry, rescue, re-announcement) ends that without touching this column.
ALTER TABLE processing_jobs ADD COLUMN announced_event_id uuid;
UPDATE processing_jobs AS j SET announced_event_id = j.current_event_id
FROM outbox_events AS e
WHERE e.id = j.current_event_id AND j.status = 'QUEUED' AND e.status = 'PUBLISHED';

-- In flight per queue and tenant: at most the scheduler's bound per queue, however many
-- jobs are queued. Lost-message recovery reads it too.
CREATE INDEX IF NOT EXISTS processing_jobs_in_flight_idx
    ON processing_jobs (job_type, tenant_id)
    WHERE status = 'QUEUED' AND announced_event_id = current_event_id;
-- Running jobs per queue and tenant (the running cap, the fair share's occupancy).
CREATE INDEX IF NOT EXISTS processing_jobs_running_idx
    ON processing_jobs (job_type, tenant_id) WHERE status = 'RUNNING';
