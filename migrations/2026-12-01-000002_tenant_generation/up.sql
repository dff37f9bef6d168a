-- A tenant's generation: how many times it was marked for deletion or reset. The API
-- reads it with the tenant's state when a request starts, and every write re-checks it
-- under a share lock of the tenant row in its own transaction, so a write let in before
-- a wipe can never commit after it, even when the tenant is active again (a reset).
-- A constant default: no table rewrite.
ALTER TABLE tenants ADD COLUMN generation bigint NOT NULL DEFAULT 0;
