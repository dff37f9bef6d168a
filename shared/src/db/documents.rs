//! Document and version rows. Every read takes the tenant id: a row of another tenant is
//! simply not found.

use diesel::prelude::*;
use diesel::sql_types::Bool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::{Date, OffsetDateTime};
use uuid::Uuid;

use super::DbError;
use super::prepared::Prepared;
use super::schema::{document_versions, documents};
use crate::states::DocumentStatus;

#[derive(Debug, Clone, PartialEq, Queryable, Selectable)]
#[diesel(table_name = documents, check_for_backend(diesel::pg::Pg))]
pub struct Document {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub title: String,
    pub status: DocumentStatus,
    pub processing_error: Option<String>,
    pub current_version_id: Option<Uuid>,
    pub issued_at: Option<Date>,
    pub trashed_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub issued_at_set_by_user: bool,
    pub correspondent_id: Option<Uuid>,
    /// Bumped by every statement that changes what a view of the document shows (a
    /// trigger, see migration `2026-12-01-000110`): the document's ETag.
    pub row_version: i64,
}

/// Which versions of a document a write accepts (`If-Match`): any (no header, or `*`),
/// or one of these row versions (an empty list, from tags that are none of ours, matches
/// none). Guarded writes compare it in their own UPDATE, never in a read before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IfMatch {
    #[default]
    Any,
    OneOf(Vec<i64>),
}

impl IfMatch {
    /// Whether a document at `row_version` may be written.
    pub fn admits(&self, row_version: i64) -> bool {
        match self {
            Self::Any => true,
            Self::OneOf(versions) => versions.contains(&row_version),
        }
    }

    /// The guard as SQL binds: (any version, the accepted versions).
    fn binds(&self) -> (bool, Vec<i64>) {
        match self {
            Self::Any => (true, Vec::new()),
            Self::OneOf(versions) => (false, versions.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = document_versions, check_for_backend(diesel::pg::Pg))]
pub struct DocumentVersion {
    pub id: Uuid,
    pub document_id: Uuid,
    pub tenant_id: Uuid,
    pub storage_key: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub content_type: String,
    pub original_filename: Option<String>,
    #[diesel(skip_insertion)]
    pub created_at: OffsetDateTime,
    /// 1 for the first version, the document's next number for each later one.
    pub number: i32,
    /// The version's own readiness; the document's status is its current version's.
    pub status: DocumentStatus,
    pub processing_error: Option<String>,
}

/// What an upload records: the document and its first version.
#[derive(Debug, Clone)]
pub struct NewDocument {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub title: String,
    pub version_id: Uuid,
    pub storage_key: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub content_type: String,
    pub original_filename: Option<String>,
}

/// A live (not trashed) document of this tenant.
pub async fn find_document(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<Option<Document>, DbError> {
    Ok(documents::table
        .filter(documents::id.eq(id))
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::trashed_at.is_null())
        .select(Document::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// A live document of this tenant with its current version (what most reads show).
pub async fn find_document_with_version(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<Option<(Document, Option<DocumentVersion>)>, DbError> {
    let Some(document) = find_document(conn, tenant_id, id).await? else {
        return Ok(None);
    };
    let version = current_version(conn, &document).await?;
    Ok(Some((document, version)))
}

/// The current version of a document (already scoped to its tenant).
pub async fn current_version(
    conn: &mut AsyncPgConnection,
    document: &Document,
) -> Result<Option<DocumentVersion>, DbError> {
    match document.current_version_id {
        Some(version_id) => find_version(conn, document.tenant_id, document.id, version_id).await,
        None => Ok(None),
    }
}

/// One version of one of this tenant's documents.
pub async fn find_version(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    version_id: Uuid,
) -> Result<Option<DocumentVersion>, DbError> {
    Ok(document_versions::table
        .filter(document_versions::id.eq(version_id))
        .filter(document_versions::document_id.eq(document_id))
        .filter(document_versions::tenant_id.eq(tenant_id))
        .select(DocumentVersion::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// The failure of a job that fails its document (the analysis, a verification that
/// found a mismatch), in its finishing transaction: the version its payload names
/// `FAILED` with a safe message, and the document too while that version is its current
/// one. A newer version whose analysis fails leaves the current one — and the
/// document's status — alone.
pub async fn mark_failed_for_job(
    conn: &mut AsyncPgConnection,
    job_id: Uuid,
    safe_message: &str,
) -> Result<bool, DbError> {
    use diesel::sql_types::{Text, Uuid as SqlUuid};
    let failed = diesel::sql_query(concat!(
        "WITH job AS ( \
             SELECT id, tenant_id, document_id, job_type, payload FROM processing_jobs \
             WHERE id = $1), ",
        super::analysis::failed_analysis_ctes!("job", "$2", "true"),
        " SELECT count(*) AS settled FROM document"
    ))
    .bind::<SqlUuid, _>(job_id)
    .bind::<Text, _>(safe_message)
    .get_result::<Settled>(conn)
    .await?;
    Ok(failed.settled == 1)
}

/// Sets `trashed_at` on a live document of this tenant at a version `if_match` admits;
/// `None` when there is none.
pub async fn trash_document(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
    if_match: &IfMatch,
) -> Result<Option<Document>, DbError> {
    let (any_version, versions) = if_match.binds();
    Ok(diesel::update(documents::table)
        .filter(documents::id.eq(id))
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::trashed_at.is_null())
        .filter(
            documents::row_version
                .eq_any(versions)
                .or(any_version.into_sql::<Bool>()),
        )
        .set((
            documents::trashed_at.eq(diesel::dsl::now),
            documents::updated_at.eq(diesel::dsl::now),
        ))
        .returning(Document::as_returning())
        .get_result(conn)
        .await
        .optional()?)
}

/// Clears `trashed_at` on a trashed document of this tenant at a version `if_match`
/// admits; `None` when there is none.
pub async fn restore_document(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
    if_match: &IfMatch,
) -> Result<Option<Document>, DbError> {
    let (any_version, versions) = if_match.binds();
    Ok(diesel::update(documents::table)
        .filter(documents::id.eq(id))
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::trashed_at.is_not_null())
        .filter(
            documents::row_version
                .eq_any(versions)
                .or(any_version.into_sql::<Bool>()),
        )
        .set((
            documents::trashed_at.eq(None::<OffsetDateTime>),
            documents::updated_at.eq(diesel::dsl::now),
        ))
        .returning(Document::as_returning())
        .get_result(conn)
        .await
        .optional()?)
}

/// A document of this tenant, trashed or not.
pub async fn find_document_including_trashed(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<Option<Document>, DbError> {
    Ok(documents::table
        .filter(documents::id.eq(id))
        .filter(documents::tenant_id.eq(tenant_id))
        .select(Document::as_select())
        .first(conn)
        .await
        .optional()?)
}

#[derive(QueryableByName)]
struct Settled {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    settled: i64,
}

/// After its analysis was cancelled, each version of the document still `PENDING` or
/// `PROCESSING` with no analysis of its own left queued or running settles, and so does a
/// live document in those states with no analysis of its current version left, in one
/// guarded statement: `READY` when that version was analyzed before (its thumbnail
/// exists), else `FAILED` with a safe error, so neither waits for an analysis that will
/// not come. `owner_types` are the job types whose outcome is the document's status.
pub async fn settle_after_cancel(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
    owner_types: &[&str],
) -> Result<bool, DbError> {
    let settled = diesel::sql_query(
        "WITH versions AS ( \
             UPDATE document_versions AS v \
             SET status = CASE WHEN seen.analyzed THEN 'READY' ELSE 'FAILED' END, \
                 processing_error = CASE WHEN seen.analyzed THEN NULL \
                     ELSE 'the analysis was cancelled; analyze the document again' END \
             FROM (SELECT x.id, EXISTS (SELECT 1 FROM assets AS a \
                       WHERE a.version_id = x.id AND a.tenant_id = $1 AND a.kind = 'thumbnail') \
                   AS analyzed FROM document_versions AS x \
                   WHERE x.document_id = $2 AND x.tenant_id = $1) AS seen \
             WHERE v.id = seen.id AND v.status IN ('PENDING', 'PROCESSING') \
               AND NOT EXISTS (SELECT 1 FROM processing_jobs AS j \
                   WHERE j.document_id = $2 AND j.tenant_id = $1 \
                     AND j.job_type = ANY($3) AND j.status IN ('QUEUED', 'RUNNING') \
                     AND j.payload ->> 'document_version_id' = v.id::text) \
             RETURNING v.id), \
         settled AS ( \
             UPDATE documents AS d \
             SET status = CASE WHEN analyzed THEN 'READY' ELSE 'FAILED' END, \
                 processing_error = CASE WHEN analyzed THEN NULL \
                     ELSE 'the analysis was cancelled; analyze the document again' END, \
                 updated_at = now() \
             FROM (SELECT EXISTS (SELECT 1 FROM assets AS a JOIN documents AS doc \
                       ON a.version_id = doc.current_version_id \
                       WHERE doc.id = $2 AND a.tenant_id = $1 AND a.kind = 'thumbnail') \
                   AS analyzed) AS seen \
             WHERE d.id = $2 AND d.tenant_id = $1 AND d.trashed_at IS NULL \
               AND d.status IN ('PENDING', 'PROCESSING') \
               AND NOT EXISTS (SELECT 1 FROM processing_jobs AS j \
                   WHERE j.document_id = d.id AND j.tenant_id = $1 \
                     AND j.job_type = ANY($3) AND j.status IN ('QUEUED', 'RUNNING') \
                     AND (j.payload ->> 'document_version_id' IS NULL \
                          OR j.payload ->> 'document_version_id' = d.current_version_id::text)) \
             RETURNING d.id) \
         SELECT count(*) AS settled FROM settled",
    )
    .bind::<diesel::sql_types::Uuid, _>(tenant_id)
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(owner_types)
    .get_result::<Settled>(conn)
    .await?;
    Ok(settled.settled == 1)
}

/// Back to `PENDING` with no error, for a failed job of a document's analysis that is
/// retried (in the retry's transaction): the version its payload names, and the document
/// while that version is its current one and the document is `FAILED`.
pub async fn mark_pending_for_job(
    conn: &mut AsyncPgConnection,
    job_id: Uuid,
) -> Result<bool, DbError> {
    let pending = diesel::sql_query(
        "WITH job AS ( \
             SELECT tenant_id, document_id, payload ->> 'document_version_id' AS version_id \
             FROM processing_jobs WHERE id = $1), \
         version AS ( \
             UPDATE document_versions AS v SET status = 'PENDING', processing_error = NULL \
             FROM job WHERE v.document_id = job.document_id AND v.tenant_id = job.tenant_id \
               AND v.id::text = job.version_id AND v.status = 'FAILED' \
             RETURNING v.id), \
         document AS ( \
             UPDATE documents AS d \
             SET status = 'PENDING', processing_error = NULL, updated_at = now() \
             FROM job WHERE d.id = job.document_id AND d.tenant_id = job.tenant_id \
               AND d.status = 'FAILED' \
               AND (job.version_id IS NULL OR d.current_version_id::text = job.version_id) \
             RETURNING d.id) \
         SELECT count(*) AS settled FROM document",
    )
    .bind::<diesel::sql_types::Uuid, _>(job_id)
    .get_result::<Settled>(conn)
    .await?;
    Ok(pending.settled == 1)
}

#[derive(QueryableByName)]
struct Existing {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Uuid>)]
    id: Option<Uuid>,
}

/// Serialises uploads of the same bytes in one tenant until the end of the transaction,
/// then returns a live document of this tenant whose current version has these bytes.
/// Two identical uploads at once cannot both pass. The rule is the database's
/// `quire_same_content` (its migration says why it is a function): one statement, the
/// lock taken before the look.
pub async fn lock_and_find_same_content(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    sha256: &str,
) -> Result<Option<Uuid>, DbError> {
    use diesel::sql_types::{Text, Uuid as SqlUuid};
    Ok(diesel::sql_query("SELECT quire_same_content($1, $2) AS id")
        .bind::<SqlUuid, _>(tenant_id)
        .bind::<Text, _>(sha256)
        .prepared()
        .get_result::<Existing>(conn)
        .await?
        .id)
}

/// What an edit may change; `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct DocumentEdit {
    pub title: Option<String>,
    /// `Some(None)` clears the date.
    pub issued_at: Option<Option<Date>>,
}

/// Applies an edit to a live document of this tenant at a version `if_match` admits; a
/// date set here is the user's and date detection never overwrites it. `labels_change`:
/// the caller changes the tags or correspondent in the same transaction, which changes
/// the document's view too, so the row version is bumped even without a field here.
/// `None` when there is no such document at such a version (nothing was written).
pub async fn edit_document(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
    edit: &DocumentEdit,
    labels_change: bool,
    if_match: &IfMatch,
) -> Result<Option<Document>, DbError> {
    #[derive(AsChangeset)]
    #[diesel(table_name = documents)]
    struct Changes<'a> {
        title: Option<&'a str>,
        issued_at: Option<Option<Date>>,
        issued_at_set_by_user: Option<bool>,
    }
    let changes = Changes {
        title: edit.title.as_deref(),
        issued_at: edit.issued_at,
        issued_at_set_by_user: edit.issued_at.map(|_| true),
    };
    let (any_version, versions) = if_match.binds();
    let target = documents::table
        .filter(documents::id.eq(id))
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::trashed_at.is_null())
        .filter(
            documents::row_version
                .eq_any(versions)
                .or(any_version.into_sql::<Bool>()),
        );
    if edit.title.is_none() && edit.issued_at.is_none() && !labels_change {
        return Ok(target
            .select(Document::as_select())
            .first(conn)
            .await
            .optional()?);
    }
    Ok(diesel::update(target)
        .set((
            changes,
            documents::updated_at.eq(diesel::dsl::now),
            documents::row_version.eq(documents::row_version + 1),
        ))
        .returning(Document::as_returning())
        .get_result(conn)
        .await
        .optional()?)
}

/// Where a listing page starts: after this (created_at, id) in newest-first order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageAfter {
    pub created_at: OffsetDateTime,
    pub id: Uuid,
}

/// Filters of a listing.
#[derive(Debug, Clone, Default)]
pub struct DocumentFilter {
    pub status: Option<DocumentStatus>,
    /// Only documents with the tag of this name.
    pub tag: Option<String>,
    /// Only documents of the correspondent of this name.
    pub correspondent: Option<String>,
    /// `true`: only the trash; `false` (default): only live documents.
    pub trashed: bool,
}

/// One page of this tenant's documents, newest first (keyset pagination: stable under
/// concurrent inserts, cheap at any depth).
pub async fn list_documents(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    filter: &DocumentFilter,
    after: Option<PageAfter>,
    limit: i64,
) -> Result<Vec<Document>, DbError> {
    let mut query = documents::table
        .filter(documents::tenant_id.eq(tenant_id))
        .into_boxed();
    query = if filter.trashed {
        query.filter(documents::trashed_at.is_not_null())
    } else {
        query.filter(documents::trashed_at.is_null())
    };
    if let Some(status) = filter.status {
        query = query.filter(documents::status.eq(status));
    }
    if let Some(tag) = &filter.tag {
        use super::schema::{document_tags, tags};
        query = query.filter(
            documents::id.eq_any(
                document_tags::table
                    .inner_join(tags::table)
                    .filter(tags::tenant_id.eq(tenant_id))
                    .filter(tags::name.eq(tag.clone()))
                    .select(document_tags::document_id),
            ),
        );
    }
    if let Some(correspondent) = &filter.correspondent {
        use super::schema::correspondents;
        query = query.filter(
            documents::correspondent_id.eq_any(
                correspondents::table
                    .filter(correspondents::tenant_id.eq(tenant_id))
                    .filter(correspondents::name.eq(correspondent.clone()))
                    .select(correspondents::id.nullable()),
            ),
        );
    }
    if let Some(after) = after {
        query = query.filter(
            documents::created_at
                .lt(after.created_at)
                .or(documents::created_at
                    .eq(after.created_at)
                    .and(documents::id.lt(after.id))),
        );
    }
    Ok(query
        .order((documents::created_at.desc(), documents::id.desc()))
        .limit(limit)
        .select(Document::as_select())
        .load(conn)
        .await?)
}

/// Live or trashed documents of this tenant by id, in no particular order (one query
/// for a page of search hits).
pub async fn find_documents(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    ids: &[Uuid],
) -> Result<Vec<Document>, DbError> {
    Ok(documents::table
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::id.eq_any(ids))
        .select(Document::as_select())
        .load(conn)
        .await?)
}

/// Versions of this tenant by id (one query for a whole listing page).
pub async fn find_versions(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    version_ids: &[Uuid],
) -> Result<Vec<DocumentVersion>, DbError> {
    Ok(document_versions::table
        .filter(document_versions::tenant_id.eq(tenant_id))
        .filter(document_versions::id.eq_any(version_ids))
        .select(DocumentVersion::as_select())
        .load(conn)
        .await?)
}

/// Locks a document of this tenant, trashed or not, until the end of the transaction:
/// a purge holds it so that a restore cannot interleave with the deletion.
pub async fn lock_document(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<Option<Document>, DbError> {
    Ok(documents::table
        .filter(documents::id.eq(id))
        .filter(documents::tenant_id.eq(tenant_id))
        .for_update()
        .select(Document::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// The storage keys of every version of a document and of every asset made from them.
pub async fn object_keys(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<Vec<String>, DbError> {
    let mut keys: Vec<String> = document_versions::table
        .filter(document_versions::tenant_id.eq(tenant_id))
        .filter(document_versions::document_id.eq(document_id))
        .select(document_versions::storage_key)
        .load(conn)
        .await?;
    keys.extend(super::assets::document_keys(conn, tenant_id, document_id).await?);
    Ok(keys)
}

/// Deletes a trashed document's rows: its assets, versions, tag links and itself. Jobs
/// keep their rows (no foreign key) as the audit record.
pub async fn delete_trashed_document(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<bool, DbError> {
    let target = documents::table
        .filter(documents::id.eq(id))
        .filter(documents::tenant_id.eq(tenant_id))
        .filter(documents::trashed_at.is_not_null());
    diesel::update(target)
        .set(documents::current_version_id.eq(None::<Uuid>))
        .execute(conn)
        .await?;
    super::assets::delete_document_assets(conn, tenant_id, id).await?;
    diesel::delete(
        document_versions::table
            .filter(document_versions::document_id.eq(id))
            .filter(document_versions::tenant_id.eq(tenant_id)),
    )
    .execute(conn)
    .await?;
    super::labels::clear_document_tags(conn, tenant_id, id).await?;
    Ok(diesel::delete(target).execute(conn).await? == 1)
}
