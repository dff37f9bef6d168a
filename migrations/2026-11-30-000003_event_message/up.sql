-- The message of an event that replaces another one (a retry, a rescue, a lost
-- message announced again): the same ids, and the request id of the upload or edit
-- that started the job, so its log lines can still be followed end to end.
CREATE FUNCTION quire_event_message(
    event_id uuid, job_id uuid, tenant_id uuid, job_type text, previous_event_id uuid
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'v', 1,
        'event_id', event_id,
        'job_id', job_id,
        'tenant_id', tenant_id,
        'job_type', job_type,
        'request_id', (SELECT e.message ->> 'request_id' FROM outbox_events e WHERE e.id = previous_event_id)
    ))
$$;
