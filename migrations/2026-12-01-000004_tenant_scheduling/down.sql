DROP TABLE queue_pauses;
ALTER TABLE tenants
    DROP COLUMN processing_paused_at,
    DROP COLUMN max_running_jobs,
    DROP COLUMN share_weight;
