//! Tags and correspondents on documents: a user's choices, and what the views show (the
//! tenant's catalogue of them is `label_catalog`; what rules set, `auto_labels`).

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sql_types::{Array, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::schema::{correspondents, document_tag_removals, document_tags, documents, tags};

/// Replaces a document's tags with `names` as the user's choice, creating the tags the
/// tenant lacks. Only the difference is the user's: a tag added is the user's link, a tag
/// taken off is recorded as removed (no rule puts it back), a tag kept keeps its link as
/// it was (a rule's stays automatic). Call with the document row locked.
pub async fn set_document_tags(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    names: &[String],
) -> Result<(), DbError> {
    let ids: Vec<Uuid> = names.iter().map(|_| Uuid::now_v7()).collect();
    diesel::sql_query(
        "INSERT INTO tags (id, tenant_id, name) \
         SELECT t.id, $1, t.name FROM unnest($2::uuid[], $3::text[]) AS t(id, name) \
         ON CONFLICT (tenant_id, name) DO NOTHING",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Array<SqlUuid>, _>(ids)
    .bind::<Array<Text>, _>(names)
    .execute(conn)
    .await?;
    // The links the user took off, gone and remembered, in one statement.
    diesel::sql_query(
        "WITH gone AS ( \
             DELETE FROM document_tags \
             WHERE tenant_id = $1 AND document_id = $2 AND tag_id NOT IN ( \
                 SELECT id FROM tags WHERE tenant_id = $1 AND name = ANY($3)) \
             RETURNING document_id, tag_id, tenant_id) \
         INSERT INTO document_tag_removals (document_id, tag_id, tenant_id) \
         SELECT document_id, tag_id, tenant_id FROM gone \
         ON CONFLICT (document_id, tag_id) DO NOTHING",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<Array<Text>, _>(names)
    .execute(conn)
    .await?;
    diesel::sql_query(
        "INSERT INTO document_tags (document_id, tag_id, tenant_id, automatic) \
         SELECT $2, id, $1, false FROM tags WHERE tenant_id = $1 AND name = ANY($3) \
         ON CONFLICT (document_id, tag_id) DO NOTHING",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<Array<Text>, _>(names)
    .execute(conn)
    .await?;
    // A tag the user puts back is no longer one they removed.
    diesel::sql_query(
        "DELETE FROM document_tag_removals \
         WHERE tenant_id = $1 AND document_id = $2 AND tag_id IN ( \
             SELECT id FROM tags WHERE tenant_id = $1 AND name = ANY($3))",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<Array<Text>, _>(names)
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes every tag link of a document, and the record of the tags its user removed.
pub async fn clear_document_tags(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<(), DbError> {
    diesel::delete(
        document_tags::table
            .filter(document_tags::document_id.eq(document_id))
            .filter(document_tags::tenant_id.eq(tenant_id)),
    )
    .execute(conn)
    .await?;
    diesel::delete(
        document_tag_removals::table
            .filter(document_tag_removals::document_id.eq(document_id))
            .filter(document_tag_removals::tenant_id.eq(tenant_id)),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Sets (creating it if needed) or clears a document's correspondent as the user's
/// choice, which no rule changes afterwards. Naming the correspondent the document has
/// already changes nothing (a rule's stays automatic). Call with the document row locked.
pub async fn set_correspondent(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    name: Option<&str>,
) -> Result<(), DbError> {
    let correspondent_id = match name {
        None => None,
        Some(name) => {
            diesel::insert_into(correspondents::table)
                .values((
                    correspondents::id.eq(Uuid::now_v7()),
                    correspondents::tenant_id.eq(tenant_id),
                    correspondents::name.eq(name),
                ))
                .on_conflict((correspondents::tenant_id, correspondents::name))
                .do_nothing()
                .execute(conn)
                .await?;
            Some(
                correspondents::table
                    .filter(correspondents::tenant_id.eq(tenant_id))
                    .filter(correspondents::name.eq(name))
                    .select(correspondents::id)
                    .first::<Uuid>(conn)
                    .await?,
            )
        }
    };
    diesel::update(
        documents::table
            .filter(documents::id.eq(document_id))
            .filter(documents::tenant_id.eq(tenant_id))
            .filter(documents::correspondent_id.is_distinct_from(correspondent_id)),
    )
    .set((
        documents::correspondent_id.eq(correspondent_id),
        documents::correspondent_automatic.eq(false),
        documents::correspondent_set_by_user.eq(true),
    ))
    .execute(conn)
    .await?;
    Ok(())
}

/// A label on a document: which, and whether a rule put it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedLabel {
    pub id: Uuid,
    pub name: String,
    /// Set by a matching rule (which may take it off again); false for a user's.
    pub automatic: bool,
}

/// The labels of some of this tenant's documents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Sorted by name.
    pub tags: Vec<AppliedLabel>,
    pub correspondent: Option<AppliedLabel>,
}

/// Labels of the given documents, in two queries whatever their number.
pub async fn labels_of(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_ids: &[Uuid],
) -> Result<HashMap<Uuid, Labels>, DbError> {
    let mut labels: HashMap<Uuid, Labels> = HashMap::new();
    let tagged: Vec<(Uuid, Uuid, String, bool)> = document_tags::table
        .inner_join(tags::table)
        .filter(document_tags::tenant_id.eq(tenant_id))
        .filter(document_tags::document_id.eq_any(document_ids))
        .order(tags::name.asc())
        .select((
            document_tags::document_id,
            tags::id,
            tags::name,
            document_tags::automatic,
        ))
        .load(conn)
        .await?;
    for (document_id, id, name, automatic) in tagged {
        labels
            .entry(document_id)
            .or_default()
            .tags
            .push(AppliedLabel {
                id,
                name,
                automatic,
            });
    }
    let named: Vec<(Uuid, Uuid, String, bool)> = documents::table
        .inner_join(
            correspondents::table.on(correspondents::id
                .nullable()
                .eq(documents::correspondent_id)),
        )
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::id.eq_any(document_ids))
        .select((
            documents::id,
            correspondents::id,
            correspondents::name,
            documents::correspondent_automatic,
        ))
        .load(conn)
        .await?;
    for (document_id, id, name, automatic) in named {
        labels.entry(document_id).or_default().correspondent = Some(AppliedLabel {
            id,
            name,
            automatic,
        });
    }
    Ok(labels)
}
