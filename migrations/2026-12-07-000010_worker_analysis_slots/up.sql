-- The analysis slots of a live worker (worker.analysis_concurrency, at most its slots):
-- of its slots, the ones an analysis may run in. The scheduler bounds an analysis queue's
-- in-flight messages by these, not by the slots. NULL: a worker from before, whose every
-- slot may analyze.
ALTER TABLE workers ADD COLUMN analysis_slots integer CHECK (analysis_slots >= 0);
