//! What matching rules write: the rules an analysis loads, and the labels it sets from
//! what they found — never over a user's choice. A rule owns a tag link it made
//! (`document_tags.automatic`) and the correspondent it set
//! (`documents.correspondent_automatic`), or an empty correspondent nobody chose; a tag
//! the user took off (`document_tag_removals`) stays off.

use diesel::sql_types::{Array, Bool, Nullable, Text, Uuid as SqlUuid};
use diesel::{OptionalExtension, QueryableByName};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use crate::matching::{Candidate, MatchAlgorithm, Matched, Rule};

/// The tenant's rules, each kind by name (the first correspondent by name wins).
#[derive(Debug, Clone, Default)]
pub struct TenantRules {
    pub tags: Vec<Candidate>,
    pub correspondents: Vec<Candidate>,
}

impl TenantRules {
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.correspondents.is_empty()
    }
}

#[derive(QueryableByName)]
struct RuleRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    match_algorithm: MatchAlgorithm,
    #[diesel(sql_type = Text)]
    match_text: String,
    #[diesel(sql_type = Bool)]
    match_case_insensitive: bool,
}

/// Every tag and correspondent of the tenant that has a rule (the partial indexes keep
/// this cheap however many labels have none).
pub async fn load_rules(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<TenantRules, DbError> {
    let mut rules = TenantRules::default();
    for (table, into) in [
        ("tags", &mut rules.tags),
        ("correspondents", &mut rules.correspondents),
    ] {
        let rows: Vec<RuleRow> = diesel::sql_query(format!(
            "SELECT id, match_algorithm, match_text, match_case_insensitive FROM {table} \
             WHERE tenant_id = $1 AND match_algorithm <> 'none' ORDER BY name"
        ))
        .bind::<SqlUuid, _>(tenant_id)
        .load(conn)
        .await?;
        into.extend(rows.into_iter().map(|row| Candidate {
            id: row.id,
            rule: Rule {
                algorithm: row.match_algorithm,
                text: row.match_text,
                case_insensitive: row.match_case_insensitive,
            },
        }));
    }
    Ok(rules)
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Bool)]
    labels: bool,
}

/// Locks the document for an analysis of `version_id` and says whether its rules may
/// label it: only while that version is the document's current one or newer than it (it
/// becomes current with its job's success; `analysis::make_current`) — an older version
/// analyzed again must not label the document after text it no longer shows. Call first
/// in the analysis's fenced transaction: the document before the version, in the order
/// every other writer takes them; a user's label edit waits for this commit, or went
/// first and is seen by [`apply`]. False when the document is gone or trashed.
pub async fn lock_for_version(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    version_id: Uuid,
) -> Result<bool, DbError> {
    let row = diesel::sql_query(
        "SELECT d.trashed_at IS NULL \
                AND coalesce(d.current_version_id = $3 \
                    OR (SELECT v.number FROM document_versions AS v \
                        WHERE v.id = $3 AND v.document_id = d.id) \
                       > (SELECT c.number FROM document_versions AS c \
                          WHERE c.id = d.current_version_id), \
                    d.current_version_id IS NULL) AS labels \
         FROM documents AS d WHERE d.id = $2 AND d.tenant_id = $1 FOR UPDATE",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<SqlUuid, _>(version_id)
    .get_result::<Locked>(conn)
    .await
    .optional()?;
    Ok(row.is_some_and(|row| row.labels))
}

/// Sets the document's automatic labels to what the rules found: a rule's tag link that
/// no longer matches goes, a matching tag is linked unless the document has it already
/// or its user removed it, and the correspondent follows the rules while they own it.
/// Labels deleted since the rules were loaded are skipped (`FOR KEY SHARE` waits for a
/// deletion under way and then skips the row, rather than fail the foreign key). True when anything changed
/// (the caller gives the document a new ETag and reindexes). Call in the analysis's
/// fenced transaction, after [`lock_for_version`] said yes.
pub async fn apply(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    matched: &Matched,
) -> Result<bool, DbError> {
    let unlinked = diesel::sql_query(
        "DELETE FROM document_tags \
         WHERE tenant_id = $1 AND document_id = $2 AND automatic AND tag_id <> ALL($3)",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<Array<SqlUuid>, _>(&matched.tag_ids)
    .execute(conn)
    .await?;
    let linked = diesel::sql_query(
        "INSERT INTO document_tags (document_id, tag_id, tenant_id, automatic) \
         SELECT $2, t.id, $1, true FROM tags t \
         WHERE t.tenant_id = $1 AND t.id = ANY($3) \
           AND NOT EXISTS (SELECT 1 FROM document_tag_removals r \
                           WHERE r.document_id = $2 AND r.tag_id = t.id) \
         FOR KEY SHARE OF t \
         ON CONFLICT (document_id, tag_id) DO NOTHING",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<Array<SqlUuid>, _>(&matched.tag_ids)
    .execute(conn)
    .await?;
    let corresponded = diesel::sql_query(
        "UPDATE documents d \
         SET correspondent_id = c.id, correspondent_automatic = (c.id IS NOT NULL) \
         FROM (SELECT (SELECT id FROM correspondents WHERE tenant_id = $1 AND id = $3 \
                       FOR KEY SHARE) AS id) c \
         WHERE d.id = $2 AND d.tenant_id = $1 \
           AND (d.correspondent_automatic \
                OR (d.correspondent_id IS NULL AND NOT d.correspondent_set_by_user)) \
           AND d.correspondent_id IS DISTINCT FROM c.id",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(document_id)
    .bind::<Nullable<SqlUuid>, _>(matched.correspondent_id)
    .execute(conn)
    .await?;
    Ok(unlinked + linked + corresponded > 0)
}
