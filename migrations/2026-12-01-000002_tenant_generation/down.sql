ALTER TABLE tenants DROP COLUMN generation;
