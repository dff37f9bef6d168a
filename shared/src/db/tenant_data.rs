//! Everything delete-tenant removes from PostgreSQL, one statement per table, children
//! first. Each function is idempotent, so a re-run after a crash half-way finishes the
//! job. Finished jobs stay as the audit record (no foreign keys, pruned by retention).

use diesel::sql_types::Uuid as SqlUuid;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::jobs::cancel_events_cte;
use super::moved::again_in_savepoint_if_moved;

async fn run_all(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    statements: &[&str],
) -> Result<(), DbError> {
    for statement in statements {
        diesel::sql_query(*statement)
            .bind::<SqlUuid, _>(tenant_id)
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// Documents, versions, assets, tags, correspondents and their links (the search text
/// and vector live on the document rows, so they go with them), and the stored answers
/// of the tenant's idempotency keys (they show those documents and members).
pub async fn delete_documents(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<(), DbError> {
    run_all(
        conn,
        tenant_id,
        &[
            "DELETE FROM idempotency_keys WHERE tenant_id = $1",
            "DELETE FROM assets WHERE tenant_id = $1",
            "DELETE FROM document_tags WHERE tenant_id = $1",
            "DELETE FROM document_tag_removals WHERE tenant_id = $1",
            "UPDATE documents SET current_version_id = NULL, correspondent_id = NULL, \
                 correspondent_automatic = false \
             WHERE tenant_id = $1",
            "DELETE FROM document_versions WHERE tenant_id = $1",
            "DELETE FROM documents WHERE tenant_id = $1",
            "DELETE FROM tags WHERE tenant_id = $1",
            "DELETE FROM correspondents WHERE tenant_id = $1",
        ],
    )
    .await
}

/// Members, capability sets and webhook subscriptions (with their deliveries): whoever
/// the tenant let in, and wherever it had its events sent.
pub async fn delete_membership(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<(), DbError> {
    run_all(
        conn,
        tenant_id,
        &[
            "DELETE FROM tenant_members WHERE tenant_id = $1",
            "DELETE FROM capability_sets WHERE tenant_id = $1",
            "DELETE FROM webhook_deliveries WHERE tenant_id = $1",
            "DELETE FROM webhook_subscriptions WHERE tenant_id = $1",
        ],
    )
    .await
}

/// The tenant's other jobs: queued ones are deleted with their events (they never ran),
/// running ones are cancelled (their heartbeat stops them; the row stays as audit).
pub async fn remove_other_jobs(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    except_job_id: Uuid,
) -> Result<(), DbError> {
    // A data-modifying CTE runs whether or not the main statement reads it.
    again_in_savepoint_if_moved!(conn, {
        diesel::sql_query(
            "WITH queued AS ( \
             SELECT id FROM processing_jobs \
             WHERE tenant_id = $1 AND status = 'QUEUED' AND id <> $2 FOR UPDATE), \
         held_events AS ( \
             SELECT id FROM outbox_events WHERE job_id IN (SELECT id FROM queued) \
             ORDER BY id FOR UPDATE), \
         events AS (DELETE FROM outbox_events WHERE id IN (SELECT id FROM held_events)) \
         DELETE FROM processing_jobs WHERE id IN (SELECT id FROM queued)",
        )
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<SqlUuid, _>(except_job_id)
        .execute(conn)
        .await
    })?;
    again_in_savepoint_if_moved!(conn, {
        diesel::sql_query(concat!(
            "WITH jobs AS ( \
             UPDATE processing_jobs \
             SET status = 'CANCELLED', finished_at = now(), lease_expires_at = NULL, \
                 error_code = 'cancelled', error_message = 'the tenant was deleted', \
                 updated_at = now() \
             WHERE tenant_id = $1 AND status = 'RUNNING' AND id <> $2 \
             RETURNING id), ",
            cancel_events_cte!()
        ))
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<SqlUuid, _>(except_job_id)
        .execute(conn)
        .await
    })?;
    Ok(())
}
