CREATE INDEX IF NOT EXISTS outbox_events_due_idx ON outbox_events (next_attempt_at)
  WHERE status = 'PENDING';
