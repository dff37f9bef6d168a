//! A tenant's tags and correspondents themselves, with their matching rules: list, find,
//! create, change, delete. Both tables have the same shape, so each statement is written
//! once for either (`LabelKind` names the table; never client input).

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use crate::matching::{MatchAlgorithm, Rule};

/// Tags or correspondents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelKind {
    Tag,
    Correspondent,
}

impl LabelKind {
    fn table(self) -> &'static str {
        match self {
            Self::Tag => "tags",
            Self::Correspondent => "correspondents",
        }
    }

    /// Longest name, in characters (the table's CHECK says the same).
    pub fn max_name_chars(self) -> usize {
        match self {
            Self::Tag => 100,
            Self::Correspondent => 200,
        }
    }

    /// The word for one, in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Tag => "tag",
            Self::Correspondent => "correspondent",
        }
    }
}

/// One tag or correspondent.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Label {
    #[diesel(sql_type = SqlUuid)]
    pub id: Uuid,
    #[diesel(sql_type = Text)]
    pub name: String,
    #[diesel(sql_type = Text)]
    pub match_algorithm: MatchAlgorithm,
    #[diesel(sql_type = Text)]
    pub match_text: String,
    #[diesel(sql_type = Bool)]
    pub match_case_insensitive: bool,
    #[diesel(sql_type = Timestamptz)]
    pub created_at: OffsetDateTime,
}

impl Label {
    pub fn rule(&self) -> Rule {
        Rule {
            algorithm: self.match_algorithm,
            text: self.match_text.clone(),
            case_insensitive: self.match_case_insensitive,
        }
    }
}

const COLUMNS: &str = "id, name, match_algorithm, match_text, match_case_insensitive, created_at";

/// A page of the tenant's labels of `kind`, by name, after the name `after`.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<Label>, DbError> {
    Ok(diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM {} WHERE tenant_id = $1 AND ($2::text IS NULL OR name > $2) \
         ORDER BY name LIMIT $3",
        kind.table()
    ))
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Nullable<Text>, _>(after)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await?)
}

/// One label of this tenant; `lock` holds its row until the transaction ends against
/// other changes of it (`FOR NO KEY UPDATE`: an analysis linking the label, which takes
/// `FOR KEY SHARE` through the foreign key, does not wait for it).
pub async fn find(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    id: Uuid,
    lock: bool,
) -> Result<Option<Label>, DbError> {
    let rows: Vec<Label> = diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM {} WHERE tenant_id = $1 AND id = $2{}",
        kind.table(),
        if lock { " FOR NO KEY UPDATE" } else { "" }
    ))
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(id)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next())
}

/// How many of the tenant's labels of `kind` have a rule.
pub async fn count_rules(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
) -> Result<i64, DbError> {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        count: i64,
    }
    let counted: Count = diesel::sql_query(format!(
        "SELECT count(*) AS count FROM {} WHERE tenant_id = $1 AND match_algorithm <> 'none'",
        kind.table()
    ))
    .bind::<SqlUuid, _>(tenant_id)
    .get_result(conn)
    .await?;
    Ok(counted.count)
}

/// A new label; `None` when the tenant has one of that name already.
pub async fn insert(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    name: &str,
    rule: &Rule,
) -> Result<Option<Label>, DbError> {
    let rows: Vec<Label> = diesel::sql_query(format!(
        "INSERT INTO {} (id, tenant_id, name, match_algorithm, match_text, match_case_insensitive) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, name) DO NOTHING \
         RETURNING {COLUMNS}",
        kind.table()
    ))
    .bind::<SqlUuid, _>(Uuid::now_v7())
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Text, _>(name)
    .bind::<Text, _>(rule.algorithm)
    .bind::<Text, _>(&rule.text)
    .bind::<Bool, _>(rule.case_insensitive)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next())
}

/// Renames a label and/or replaces its rule (`None` keeps either). Another label of that
/// name makes it fail with a unique violation.
pub async fn update(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    id: Uuid,
    name: Option<&str>,
    rule: Option<&Rule>,
) -> Result<Option<Label>, DbError> {
    let rows: Vec<Label> = diesel::sql_query(format!(
        "UPDATE {} SET name = coalesce($3, name), \
             match_algorithm = coalesce($4, match_algorithm), \
             match_text = coalesce($5, match_text), \
             match_case_insensitive = coalesce($6, match_case_insensitive) \
         WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}",
        kind.table()
    ))
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(id)
    .bind::<Nullable<Text>, _>(name)
    .bind::<Nullable<Text>, _>(rule.map(|rule| rule.algorithm))
    .bind::<Nullable<Text>, _>(rule.map(|rule| rule.text.as_str()))
    .bind::<Nullable<Bool>, _>(rule.map(|rule| rule.case_insensitive))
    .load(conn)
    .await?;
    Ok(rows.into_iter().next())
}

/// The live and trashed documents that carry the label (their search vectors name it).
pub async fn documents_labelled(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    id: Uuid,
) -> Result<Vec<Uuid>, DbError> {
    #[derive(QueryableByName)]
    struct Document {
        #[diesel(sql_type = SqlUuid)]
        id: Uuid,
    }
    let query = match kind {
        LabelKind::Tag => {
            "SELECT document_id AS id FROM document_tags WHERE tenant_id = $1 AND tag_id = $2"
        }
        LabelKind::Correspondent => {
            "SELECT id FROM documents WHERE tenant_id = $1 AND correspondent_id = $2"
        }
    };
    let rows: Vec<Document> = diesel::sql_query(query)
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<SqlUuid, _>(id)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|row| row.id).collect())
}

/// Locks these documents of the tenant, in id order. A rename or deletion of a label
/// takes the documents that carry it first, then the label, the order an analysis and a
/// user's edit take them in (a document, then its labels through the foreign keys):
/// none of them waits for another in a cycle.
pub async fn lock_documents(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_ids: &[Uuid],
) -> Result<(), DbError> {
    if document_ids.is_empty() {
        return Ok(());
    }
    diesel::sql_query(
        "SELECT id FROM documents WHERE tenant_id = $1 AND id = ANY($2) ORDER BY id FOR UPDATE",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Array<SqlUuid>, _>(document_ids)
    .execute(conn)
    .await?;
    Ok(())
}

/// Gives these documents a new row version (their ETag): a label they carry was renamed
/// or deleted, which their views show, but the change is in the label's table or the
/// links, not in the documents row the version trigger watches. Call with the documents
/// locked (`lock_documents`), in the transaction of the change.
pub async fn touch_documents(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_ids: &[Uuid],
) -> Result<(), DbError> {
    if document_ids.is_empty() {
        return Ok(());
    }
    diesel::sql_query(
        "UPDATE documents SET updated_at = now(), row_version = row_version + 1 \
         WHERE tenant_id = $1 AND id = ANY($2)",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Array<SqlUuid>, _>(document_ids)
    .execute(conn)
    .await?;
    Ok(())
}

/// Takes the label off every document and deletes it (with the record of who removed a
/// tag). True when it existed. Reindex the documents `documents_labelled` named after.
pub async fn delete(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    id: Uuid,
) -> Result<bool, DbError> {
    let unlink: &[&str] = match kind {
        LabelKind::Tag => &[
            "DELETE FROM document_tags WHERE tenant_id = $1 AND tag_id = $2",
            "DELETE FROM document_tag_removals WHERE tenant_id = $1 AND tag_id = $2",
        ],
        // The choice named a correspondent that is gone: rules may set one again.
        LabelKind::Correspondent => &[
            "UPDATE documents SET correspondent_id = NULL, correspondent_automatic = false, \
                 correspondent_set_by_user = false \
             WHERE tenant_id = $1 AND correspondent_id = $2",
        ],
    };
    for statement in unlink {
        diesel::sql_query(*statement)
            .bind::<SqlUuid, _>(tenant_id)
            .bind::<SqlUuid, _>(id)
            .execute(conn)
            .await?;
    }
    let deleted = diesel::sql_query(format!(
        "DELETE FROM {} WHERE tenant_id = $1 AND id = $2",
        kind.table()
    ))
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(id)
    .execute(conn)
    .await?;
    Ok(deleted == 1)
}

/// Recomputes the search vectors of these documents (a label they carry was renamed or
/// deleted), in one statement.
pub async fn reindex_documents(
    conn: &mut AsyncPgConnection,
    document_ids: &[Uuid],
) -> Result<(), DbError> {
    if document_ids.is_empty() {
        return Ok(());
    }
    diesel::sql_query("SELECT quire_reindex_document(id) FROM unnest($1::uuid[]) AS d(id)")
        .bind::<Array<SqlUuid>, _>(document_ids)
        .execute(conn)
        .await?;
    Ok(())
}
