DROP INDEX IF EXISTS processing_jobs_running_idx;
DROP INDEX IF EXISTS processing_jobs_in_flight_idx;
ALTER TABLE processing_jobs DROP COLUMN announced_event_id;
DROP INDEX IF EXISTS outbox_events_fair_idx;
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_priority_check;
ALTER TABLE outbox_events DROP COLUMN priority;
