-- A date the user set through the API is never overwritten by date detection.
ALTER TABLE documents ADD COLUMN issued_at_set_by_user boolean NOT NULL DEFAULT false;
