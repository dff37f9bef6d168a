ALTER TABLE documents DROP COLUMN issued_at_set_by_user;
