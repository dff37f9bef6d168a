-- Periodic jobs (issue 16): one row per schedule. A dispatcher runs a slot only after
-- claiming it in one guarded statement (`next_run_at <= now()`, moved past now() in the
-- same statement), so across any number of dispatchers each slot runs once, and one that
-- was down runs once when it is back, not once per slot it missed.
CREATE TABLE schedules (
    name              text PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 64),
    interval_ms       bigint NOT NULL CHECK (interval_ms >= 1),
    next_run_at       timestamptz NOT NULL,
    last_run_at       timestamptz,
    last_finished_at  timestamptz,
    -- Slots claimed so far; a run's later writes are fenced by the count it claimed.
    runs              bigint NOT NULL DEFAULT 0 CHECK (runs >= 0),
    last_outcome      text CHECK (last_outcome IN ('running', 'succeeded', 'failed')),
    -- What the last run did, in words safe to show a tenant (never an error's text).
    last_detail       text CHECK (char_length(last_detail) <= 500),
    -- A schedule that walks rows over many slots (the integrity scrub): the last row it
    -- reached (NULL between passes) and when its current or last pass began.
    cursor_id         uuid,
    pass_started_at   timestamptz
);

-- Emptying the trash looks for each tenant's oldest trash. Small (trashed rows only);
-- on a large table create it by hand first, CONCURRENTLY (migrations/README.md).
CREATE INDEX IF NOT EXISTS documents_trashed_idx
    ON documents (tenant_id, trashed_at) WHERE trashed_at IS NOT NULL;
