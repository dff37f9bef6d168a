-- What happened to a tenant's documents and jobs, recorded in the transaction that made
-- it happen (db::tenant_events::record): webhooks deliver it and GET /api/events streams
-- it. Rows are kept for a retention window and pruned by time. A stream reads them in
-- (txid, id) order and only below its snapshot's xmin: a bigserial id is taken before
-- its transaction commits, so ids alone can commit out of order and a reader that
-- went by them could step past an event that becomes visible later
-- (db::tenant_events::list_after).
CREATE TABLE tenant_events (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    event_type text NOT NULL CHECK (event_type IN (
        'document.ready', 'document.failed', 'document.trashed', 'document.purged',
        'job.failed')),
    subject_id uuid NOT NULL,
    payload jsonb NOT NULL,
    -- The writing transaction's id (xid8 as bigint: it never wraps).
    txid bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX tenant_events_tenant_idx ON tenant_events (tenant_id, txid, id);
CREATE INDEX tenant_events_created_idx ON tenant_events (created_at);
