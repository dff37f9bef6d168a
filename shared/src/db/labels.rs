//! Tags and correspondents: names a tenant gives its documents.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sql_types::{Array, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::schema::{correspondents, document_tags, documents, tags};

/// Replaces a document's tags with `names`, creating the tags the tenant lacks.
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
    clear_document_tags(conn, tenant_id, document_id).await?;
    diesel::sql_query(
        "INSERT INTO document_tags (document_id, tag_id, tenant_id) \
         SELECT $2, id, $1 FROM tags WHERE tenant_id = $1 AND name = ANY($3)",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<Array<Text>, _>(names)
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes every tag link of a document.
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
    Ok(())
}

/// Sets (creating it if needed) or clears a document's correspondent.
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
            .filter(documents::tenant_id.eq(tenant_id)),
    )
    .set(documents::correspondent_id.eq(correspondent_id))
    .execute(conn)
    .await?;
    Ok(())
}

/// The labels of some of this tenant's documents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Sorted by name.
    pub tags: Vec<String>,
    pub correspondent: Option<String>,
}

/// Labels of the given documents, in two queries whatever their number.
pub async fn labels_of(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_ids: &[Uuid],
) -> Result<HashMap<Uuid, Labels>, DbError> {
    let mut labels: HashMap<Uuid, Labels> = HashMap::new();
    let tagged: Vec<(Uuid, String)> = document_tags::table
        .inner_join(tags::table)
        .filter(document_tags::tenant_id.eq(tenant_id))
        .filter(document_tags::document_id.eq_any(document_ids))
        .order(tags::name.asc())
        .select((document_tags::document_id, tags::name))
        .load(conn)
        .await?;
    for (document_id, name) in tagged {
        labels.entry(document_id).or_default().tags.push(name);
    }
    let named: Vec<(Uuid, String)> = documents::table
        .inner_join(
            correspondents::table.on(correspondents::id
                .nullable()
                .eq(documents::correspondent_id)),
        )
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::id.eq_any(document_ids))
        .select((documents::id, correspondents::name))
        .load(conn)
        .await?;
    for (document_id, name) in named {
        labels.entry(document_id).or_default().correspondent = Some(name);
    }
    Ok(labels)
}
