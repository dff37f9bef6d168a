-- Due events are found along outbox_events_fair_idx (queue, priority, tenant_id,
-- next_attempt_at) WHERE status = 'PENDING', which the scheduler's round walks. A second
-- partial index with the same predicate gave the planner a choice it makes on statistics:
-- after a vacuum of an idle outbox both are recorded empty, and it scanned every due
-- event along outbox_events_due_idx (next_attempt_at) for each tenant's head, once per
-- round, instead of stepping along the fair index (the scale bench, docs/benchmarks.md,
-- "Cost at scale"). The outbox lag and the pending count read the fair index as well.
DROP INDEX IF EXISTS outbox_events_due_idx;
