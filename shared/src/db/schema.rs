//! Diesel's view of the schema in `migrations/`. Written by hand (no diesel CLI needed);
//! `tests/schema_matches_migrations` in the test suite keeps it honest.

diesel::table! {
    tenants (id) {
        id -> Uuid,
        name -> Text,
        status -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        generation -> Int8,
        share_weight -> Int4,
        max_running_jobs -> Nullable<Int4>,
        processing_paused_at -> Nullable<Timestamptz>,
        enqueue_rate_per_second -> Nullable<Int4>,
        enqueue_burst -> Nullable<Int4>,
        date_languages -> Nullable<Array<Text>>,
        date_order -> Nullable<Text>,
    }
}

diesel::table! {
    /// Written by raw SQL only (`db::enqueue_budget`).
    tenant_enqueue_budgets (tenant_id) {
        tenant_id -> Uuid,
        tat -> Timestamptz,
    }
}

diesel::table! {
    queue_pauses (queue) {
        queue -> Text,
        paused_at -> Timestamptz,
        paused_by -> Text,
    }
}

diesel::table! {
    documents (id) {
        id -> Uuid,
        tenant_id -> Uuid,
        title -> Text,
        status -> Text,
        processing_error -> Nullable<Text>,
        current_version_id -> Nullable<Uuid>,
        issued_at -> Nullable<Date>,
        trashed_at -> Nullable<Timestamptz>,
        issued_at_set_by_user -> Bool,
        correspondent_id -> Nullable<Uuid>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        content_text -> Nullable<Text>,
        row_version -> Int8,
        last_version_number -> Int4,
        correspondent_automatic -> Bool,
        correspondent_set_by_user -> Bool,
    }
}

diesel::table! {
    document_versions (id) {
        id -> Uuid,
        document_id -> Uuid,
        tenant_id -> Uuid,
        storage_key -> Text,
        size_bytes -> Int8,
        sha256 -> Text,
        content_type -> Text,
        original_filename -> Nullable<Text>,
        created_at -> Timestamptz,
        number -> Int4,
        status -> Text,
        processing_error -> Nullable<Text>,
        findings_text -> Nullable<Text>,
        findings_issued_at -> Nullable<Date>,
    }
}

diesel::table! {
    processing_jobs (id) {
        id -> Uuid,
        tenant_id -> Uuid,
        document_id -> Nullable<Uuid>,
        job_type -> Text,
        payload -> Jsonb,
        status -> Text,
        attempts -> Int4,
        max_attempts -> Int4,
        current_event_id -> Nullable<Uuid>,
        worker_id -> Nullable<Text>,
        last_task_id -> Nullable<Uuid>,
        lease_expires_at -> Nullable<Timestamptz>,
        heartbeat_at -> Nullable<Timestamptz>,
        queued_at -> Timestamptz,
        started_at -> Nullable<Timestamptz>,
        finished_at -> Nullable<Timestamptz>,
        error_code -> Nullable<Text>,
        error_message -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        announced_event_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    outbox_events (id) {
        id -> Uuid,
        job_id -> Uuid,
        tenant_id -> Uuid,
        queue -> Text,
        message -> Jsonb,
        status -> Text,
        publish_attempts -> Int4,
        next_attempt_at -> Timestamptz,
        claimed_at -> Nullable<Timestamptz>,
        claimed_by -> Nullable<Text>,
        broker_task_id -> Nullable<Uuid>,
        last_error -> Nullable<Text>,
        published_at -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
        priority -> Text,
    }
}

diesel::table! {
    correspondents (id) {
        id -> Uuid,
        tenant_id -> Uuid,
        name -> Text,
        created_at -> Timestamptz,
        match_algorithm -> Text,
        match_text -> Text,
        match_case_insensitive -> Bool,
    }
}

diesel::table! {
    tags (id) {
        id -> Uuid,
        tenant_id -> Uuid,
        name -> Text,
        created_at -> Timestamptz,
        match_algorithm -> Text,
        match_text -> Text,
        match_case_insensitive -> Bool,
    }
}

diesel::table! {
    document_tags (document_id, tag_id) {
        document_id -> Uuid,
        tag_id -> Uuid,
        tenant_id -> Uuid,
        automatic -> Bool,
    }
}

diesel::table! {
    document_tag_removals (document_id, tag_id) {
        document_id -> Uuid,
        tag_id -> Uuid,
        tenant_id -> Uuid,
        removed_at -> Timestamptz,
    }
}

diesel::table! {
    capability_sets (tenant_id, name) {
        tenant_id -> Uuid,
        name -> Text,
        permissions -> Array<Text>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    tenant_members (tenant_id, user_id) {
        tenant_id -> Uuid,
        user_id -> Uuid,
        capability_set -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    search_indexes (tenant_id) {
        tenant_id -> Uuid,
        language -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    used_nonces (nonce) {
        nonce -> Text,
        purpose -> Text,
        tenant_id -> Uuid,
        job_id -> Uuid,
        used_at -> Timestamptz,
    }
}

diesel::table! {
    assets (id) {
        id -> Uuid,
        tenant_id -> Uuid,
        document_id -> Uuid,
        version_id -> Uuid,
        kind -> Text,
        storage_key -> Text,
        size_bytes -> Int8,
        sha256 -> Text,
        content_type -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    workers (id) {
        id -> Text,
        host -> Text,
        pid -> Int4,
        slots -> Int4,
        busy -> Int4,
        queues -> Array<Text>,
        started_at -> Timestamptz,
        last_seen_at -> Timestamptz,
        analysis_slots -> Nullable<Int4>,
    }
}

diesel::table! {
    ops_sessions (id) {
        id -> Uuid,
        secret_sha256 -> Bytea,
        operator -> Text,
        token_id -> Nullable<Text>,
        token_expires_at -> Timestamptz,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    queue_state_snapshot (id) {
        id -> Bool,
        state -> Jsonb,
        refreshed_at -> Timestamptz,
        refreshes -> Int8,
    }
}

diesel::table! {
    storage_gc_cursor (id) {
        id -> Bool,
        after_key -> Nullable<Text>,
        passes -> Int8,
        sweeps -> Int8,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    schedules (name) {
        name -> Text,
        interval_ms -> Int8,
        next_run_at -> Timestamptz,
        last_run_at -> Nullable<Timestamptz>,
        last_finished_at -> Nullable<Timestamptz>,
        runs -> Int8,
        last_outcome -> Nullable<Text>,
        last_detail -> Nullable<Text>,
        cursor_id -> Nullable<Uuid>,
        pass_started_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    tenant_events (id) {
        id -> Int8,
        tenant_id -> Uuid,
        event_type -> Text,
        subject_id -> Uuid,
        payload -> Jsonb,
        txid -> Int8,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_subscriptions (id) {
        id -> Uuid,
        tenant_id -> Uuid,
        url -> Text,
        secret -> Text,
        event_types -> Array<Text>,
        enabled -> Bool,
        disabled_reason -> Nullable<Text>,
        disabled_at -> Nullable<Timestamptz>,
        consecutive_failures -> Int4,
        failing_since -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_deliveries (id) {
        id -> Uuid,
        tenant_id -> Uuid,
        subscription_id -> Uuid,
        event_id -> Int8,
        message_id -> Uuid,
        event_type -> Text,
        status -> Text,
        attempts -> Int4,
        last_attempt_at -> Nullable<Timestamptz>,
        response_status -> Nullable<Int4>,
        response_body -> Nullable<Text>,
        last_error -> Nullable<Text>,
        delivered_at -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    idempotency_keys (scope, key) {
        scope -> Text,
        key -> Text,
        tenant_id -> Nullable<Uuid>,
        request_digest -> Bytea,
        status -> Nullable<Int2>,
        headers -> Nullable<Jsonb>,
        body -> Nullable<Bytea>,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    tenant_event_horizons (tenant_id) {
        tenant_id -> Uuid,
        txid -> Int8,
        id -> Int8,
        pruned_at -> Timestamptz,
    }
}

diesel::joinable!(documents -> tenants (tenant_id));
diesel::joinable!(document_tags -> tags (tag_id));
diesel::joinable!(document_tags -> documents (document_id));
diesel::joinable!(document_versions -> documents (document_id));
diesel::joinable!(outbox_events -> processing_jobs (job_id));
diesel::joinable!(webhook_deliveries -> webhook_subscriptions (subscription_id));

diesel::allow_tables_to_appear_in_same_query!(
    tenants,
    documents,
    document_versions,
    processing_jobs,
    outbox_events,
    correspondents,
    tags,
    document_tags,
    document_tag_removals,
    capability_sets,
    tenant_members,
    search_indexes,
    used_nonces,
    assets,
    workers,
    ops_sessions,
    queue_state_snapshot,
    queue_pauses,
    storage_gc_cursor,
    schedules,
    tenant_events,
    webhook_subscriptions,
    webhook_deliveries,
    idempotency_keys,
    tenant_event_horizons,
);
