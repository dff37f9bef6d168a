DROP INDEX IF EXISTS documents_trashed_idx;
DROP TABLE schedules;
