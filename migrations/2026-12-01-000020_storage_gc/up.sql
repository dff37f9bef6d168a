-- Storage GC's place in its sweep of the object store: a pass lists objects in key order
-- after `after_key`, collects the ones no row names that are older than the grace, and
-- stores the last key it looked at, so the next pass (in any dispatcher) resumes there.
-- NULL: the next pass starts from the first key. One row at most.
CREATE TABLE storage_gc_cursor (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    after_key   text,
    -- Passes run and sweeps of the whole store completed, by any dispatcher.
    passes      bigint NOT NULL DEFAULT 0 CHECK (passes >= 0),
    sweeps      bigint NOT NULL DEFAULT 0 CHECK (sweeps >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
