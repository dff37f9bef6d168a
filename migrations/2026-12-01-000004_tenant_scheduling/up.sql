-- Fair scheduling between tenants (the dispatcher chooses what to publish next):
-- each tenant's share weight (default equal), its cap on concurrently running jobs
-- (NULL: `scheduling.max_running_per_tenant` from the configuration) and its processing
-- pause (NULL: not paused). Constant defaults: no table rewrite.
ALTER TABLE tenants
    ADD COLUMN share_weight integer NOT NULL DEFAULT 1
        CHECK (share_weight BETWEEN 1 AND 1000),
    ADD COLUMN max_running_jobs integer
        CHECK (max_running_jobs BETWEEN 1 AND 100000),
    ADD COLUMN processing_paused_at timestamptz;

-- A paused queue (a job type's list): its due events are held, not failed, until the
-- row is deleted (resume).
CREATE TABLE queue_pauses (
    queue      text PRIMARY KEY CHECK (char_length(queue) BETWEEN 1 AND 200),
    paused_at  timestamptz NOT NULL DEFAULT now(),
    paused_by  text NOT NULL CHECK (char_length(paused_by) BETWEEN 1 AND 200)
);
