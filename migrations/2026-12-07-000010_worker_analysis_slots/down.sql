ALTER TABLE workers DROP COLUMN analysis_slots;
