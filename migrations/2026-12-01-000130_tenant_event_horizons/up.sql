-- How far the retention has pruned each tenant's event log: the last pruned event in
-- the log's (txid, id) order. A stream resuming from a position before it may have
-- missed a pruned event and answers 410; from any later position it misses nothing
-- (db::event_stream). Written in the statement that prunes, so a reader's snapshot sees
-- the rows gone and the horizon moved together, or neither.
CREATE TABLE tenant_event_horizons (
    tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    txid bigint NOT NULL,
    id bigint NOT NULL,
    pruned_at timestamptz NOT NULL DEFAULT now()
);
