-- Finished jobs $1 .. $2 - 1 of $3, each with $4 outbox events, as real traffic leaves
-- them: spread over the last six days (inside every retention window, so the
-- dispatcher's retention prunes none of it while the bench runs), ids UUIDv7 of their own
-- instant like every id Quire makes, half of them in the first tenant of $5 and the rest
-- round-robin over the others. Job types in the proportions of an intake service
-- (analyze, verify, purge, webhook and no-op jobs), 2 % FAILED and 1 % CANCELLED, the rest
-- SUCCEEDED; every event PUBLISHED but a cancelled job's last. Each row as Quire writes it,
-- to the byte: the stored message is `quire_event_message`'s (the publication's task id
-- and time go over Redis only), `claimed_by` a dispatcher's id. Rows larger than Quire's
-- own left many history pages room for one more of those, and the mark's moved events
-- went one to a cold page (docs/benchmarks.md, "Fourth full size"). One statement per
-- chunk: the jobs' insert runs in a CTE, so each event's foreign key finds its job.
WITH g AS (
  SELECT i,
    now() - make_interval(secs => $6::float8 * (1 - i::float8 / $3::int8)) AS at,
    CASE WHEN i % 2 = 0 THEN ($5::uuid[])[1]
         ELSE ($5::uuid[])[2 + (i / 2) % (cardinality($5::uuid[]) - 1)] END AS tenant_id,
    (ARRAY['analyze-document', 'analyze-document', 'analyze-document', 'analyze-document',
           'verify-document', 'verify-document', 'verify-document', 'bench-noop',
           'purge-document', 'deliver-webhook'])[1 + i % 10] AS job_type,
    CASE WHEN i % 50 = 7 THEN 'FAILED' WHEN i % 100 = 13 THEN 'CANCELLED' ELSE 'SUCCEEDED' END
      AS status,
    gen_random_uuid() AS document_id
  FROM generate_series($1::int8, $2::int8 - 1) AS i
), j AS (
  -- UUIDv7: the instant's 48-bit milliseconds, then random bits with version 7.
  SELECT g.*,
    encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
      PLACING substring(int8send((extract(epoch FROM at) * 1000)::int8) FROM 3) FROM 1),
      52, 1), 53, 1), 'hex')::uuid AS job_id
  FROM g
), e AS (
  SELECT j.*, k, j.at + k * interval '1 millisecond' AS event_at,
    encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
      PLACING substring(int8send((extract(epoch FROM j.at) * 1000)::int8 + k) FROM 3) FROM 1),
      52, 1), 53, 1), 'hex')::uuid AS event_id
  FROM j CROSS JOIN generate_series(1, $4::int4) AS k
), jobs AS (
  INSERT INTO processing_jobs (id, tenant_id, document_id, job_type, payload, status, attempts,
      max_attempts, current_event_id, announced_event_id, worker_id, last_task_id,
      lease_expires_at, heartbeat_at, queued_at, started_at, finished_at, error_code,
      error_message, created_at, updated_at)
  SELECT job_id, tenant_id,
      CASE WHEN job_type IN ('analyze-document', 'verify-document', 'purge-document')
           THEN document_id END,
      job_type,
      CASE WHEN job_type IN ('analyze-document', 'verify-document')
           THEN jsonb_build_object('document_id', document_id,
                                   'document_version_id', gen_random_uuid(), 'force', false)
           WHEN job_type = 'purge-document' THEN jsonb_build_object('document_id', document_id)
           ELSE '{}'::jsonb END,
      status, k, 5, event_id, event_id, 'history-worker', gen_random_uuid(),
      event_at + interval '30 seconds', event_at, at, event_at,
      event_at + interval '50 milliseconds',
      CASE status WHEN 'FAILED' THEN 'integrity_mismatch' WHEN 'CANCELLED' THEN 'cancelled' END,
      CASE status WHEN 'FAILED' THEN 'the stored bytes do not match the recorded digest'
                  WHEN 'CANCELLED' THEN 'the document was trashed' END,
      at, event_at + interval '50 milliseconds'
  FROM e WHERE k = $4
  RETURNING 1
)
INSERT INTO outbox_events (id, job_id, tenant_id, queue, message, status, publish_attempts,
    next_attempt_at, claimed_at, claimed_by, broker_task_id, published_at, created_at, priority)
SELECT event_id, job_id, tenant_id, job_type,
    quire_event_message(event_id, job_id, tenant_id, job_type, NULL),
    CASE WHEN status = 'CANCELLED' AND k = $4 THEN 'CANCELLED' ELSE 'PUBLISHED' END, 0,
    event_at, event_at, 'dispatcher-' || replace(gen_random_uuid()::text, '-', ''),
    gen_random_uuid(), event_at, event_at,
    CASE WHEN job_type = 'verify-document' THEN 'bulk' ELSE 'interactive' END
FROM e
