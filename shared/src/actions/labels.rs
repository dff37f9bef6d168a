//! The actions on a tenant's tags and correspondents: list, get, create, change (name
//! and matching rule), delete. A rule is checked here, once, for every way it gets in; a
//! changed rule applies from the next analysis of each document (a re-analysis applies
//! it to documents analyzed before).

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::{ActionError, hold_tenant};
use crate::db::label_catalog::{self, Label, LabelKind};
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::matching::{MatchAlgorithm, Matcher, Rule};
use crate::states::TenantStatus;

/// Most labels of one kind (tags, correspondents) a tenant may give a rule: every
/// analysis of the tenant runs all of them over the document's text.
pub const MAX_RULES_PER_KIND: i64 = 200;

/// Most labels one page lists.
pub const MAX_PAGE: i64 = 1000;

/// A label's name as a client sent it, trimmed, or why it is refused: one rule for the
/// catalogue and for a document's edit. The length limit counts what was sent, spaces
/// around it included, as the OpenAPI document's `maxLength` does.
pub fn checked_name(kind: LabelKind, raw: &str) -> Result<String, ActionError> {
    let name = raw.trim();
    let max = kind.max_name_chars();
    if name.is_empty() || raw.chars().count() > max || name.chars().any(char::is_control) {
        return Err(ActionError::Invalid {
            code: match kind {
                LabelKind::Tag => "invalid_tags",
                LabelKind::Correspondent => "invalid_correspondent",
            },
            detail: format!(
                "a {} has 1 to {max} characters and no control characters",
                kind.noun()
            ),
        });
    }
    Ok(name.to_owned())
}

/// A rule as a client sent it, or why it is refused (`invalid_rule`, `invalid_regex`,
/// `regex_too_large`): it must compile within the matching limits.
pub fn checked_rule(rule: Rule) -> Result<Rule, ActionError> {
    Matcher::compile(&rule).map_err(|fault| ActionError::Invalid {
        code: fault.code(),
        detail: fault.to_string(),
    })?;
    Ok(rule)
}

/// What a create sends.
#[derive(Debug, Clone)]
pub struct NewLabel {
    pub name: String,
    pub rule: Rule,
}

/// What a change sends; `None` keeps the field.
#[derive(Debug, Clone, Default)]
pub struct LabelChange {
    pub name: Option<String>,
    pub rule: Option<Rule>,
}

/// A page of the tenant's labels of `kind`, by name.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<Label>, ActionError> {
    let limit = limit.clamp(1, MAX_PAGE);
    Ok(label_catalog::list(conn, tenant_id, kind, after, limit).await?)
}

pub async fn get(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
    id: Uuid,
) -> Result<Label, ActionError> {
    label_catalog::find(conn, tenant_id, kind, id, false)
        .await?
        .ok_or(ActionError::NotFound)
}

fn name_taken(kind: LabelKind) -> ActionError {
    ActionError::conflict(
        match kind {
            LabelKind::Tag => "tag_name_taken",
            LabelKind::Correspondent => "correspondent_name_taken",
        },
        format!("a {} of this name exists already", kind.noun()),
    )
}

/// Refuses a rule past the tenant's allowance. Call holding the tenant `FOR UPDATE`, so
/// two requests cannot both take the last place.
async fn check_allowance(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    kind: LabelKind,
) -> Result<(), ActionError> {
    if label_catalog::count_rules(conn, tenant_id, kind).await? >= MAX_RULES_PER_KIND {
        return Err(ActionError::Invalid {
            code: "too_many_rules",
            detail: format!(
                "a tenant gives a rule to at most {MAX_RULES_PER_KIND} {}s",
                kind.noun()
            ),
        });
    }
    Ok(())
}

/// A new tag or correspondent with its rule (409 when the name is taken).
pub async fn create(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    kind: LabelKind,
    new: NewLabel,
) -> Result<Label, ActionError> {
    let name = checked_name(kind, &new.name)?;
    let rule = checked_rule(new.rule)?;
    let tenant_id = tenant.tenant_id;
    let created = conn
        .transaction::<_, ActionError, _>(async |conn| {
            let has_rule = rule.algorithm != MatchAlgorithm::Never;
            let lock = if has_rule {
                TenantLock::Update
            } else {
                TenantLock::Share
            };
            hold_tenant(conn, tenant, TenantStatus::Active, lock).await?;
            if has_rule {
                check_allowance(conn, tenant_id, kind).await?;
            }
            label_catalog::insert(conn, tenant_id, kind, &name, &rule)
                .await?
                .ok_or_else(|| name_taken(kind))
        })
        .await?;
    tracing::info!(%tenant_id, label_id = %created.id, kind = kind.noun(), algorithm = %created.match_algorithm, "label created");
    Ok(created)
}

/// Renames a label and/or replaces its rule. A new name is reindexed at once in the
/// documents that carry it (search finds labels by name).
pub async fn change(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    kind: LabelKind,
    id: Uuid,
    change: LabelChange,
) -> Result<Label, ActionError> {
    let name = change
        .name
        .map(|name| checked_name(kind, &name))
        .transpose()?;
    let rule = change.rule.map(checked_rule).transpose()?;
    let tenant_id = tenant.tenant_id;
    let changed = conn
        .transaction::<_, ActionError, _>(async |conn| {
            let gains_rule = rule
                .as_ref()
                .is_some_and(|rule| rule.algorithm != MatchAlgorithm::Never);
            let lock = if gains_rule {
                TenantLock::Update
            } else {
                TenantLock::Share
            };
            hold_tenant(conn, tenant, TenantStatus::Active, lock).await?;
            let before = label_catalog::find(conn, tenant_id, kind, id, true)
                .await?
                .ok_or(ActionError::NotFound)?;
            if gains_rule && before.match_algorithm == MatchAlgorithm::Never {
                check_allowance(conn, tenant_id, kind).await?;
            }
            // Search finds labels by name: the documents that carry it are reindexed,
            // locked before the label's row changes (see `lock_documents`).
            let renamed = name.as_deref().is_some_and(|name| name != before.name);
            let labelled = if renamed {
                let labelled = label_catalog::documents_labelled(conn, tenant_id, kind, id).await?;
                label_catalog::lock_documents(conn, tenant_id, &labelled).await?;
                labelled
            } else {
                Vec::new()
            };
            let after = match label_catalog::update(
                conn,
                tenant_id,
                kind,
                id,
                name.as_deref(),
                rule.as_ref(),
            )
            .await
            {
                Ok(after) => after.ok_or(ActionError::NotFound)?,
                Err(error) if error.is_unique_violation() => return Err(name_taken(kind)),
                Err(error) => return Err(error.into()),
            };
            label_catalog::reindex_documents(conn, &labelled).await?;
            // Their views show the new name: a new ETag each.
            label_catalog::touch_documents(conn, tenant_id, &labelled).await?;
            Ok(after)
        })
        .await?;
    tracing::info!(%tenant_id, label_id = %id, kind = kind.noun(), algorithm = %changed.match_algorithm, "label changed");
    Ok(changed)
}

/// Deletes a label: it comes off every document (which are reindexed at once), then goes.
pub async fn delete(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    kind: LabelKind,
    id: Uuid,
) -> Result<(), ActionError> {
    let tenant_id = tenant.tenant_id;
    // An analysis or edit that linked the label to another document while this one ran
    // makes the deletion fail its foreign key: the next attempt sees that document too.
    let mut attempts = 0;
    let unlabelled = loop {
        attempts += 1;
        let deleted = conn
            .transaction::<_, ActionError, _>(async |conn| {
                hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Share).await?;
                label_catalog::find(conn, tenant_id, kind, id, true)
                    .await?
                    .ok_or(ActionError::NotFound)?;
                let labelled = label_catalog::documents_labelled(conn, tenant_id, kind, id).await?;
                label_catalog::lock_documents(conn, tenant_id, &labelled).await?;
                label_catalog::delete(conn, tenant_id, kind, id).await?;
                label_catalog::reindex_documents(conn, &labelled).await?;
                // Their views lose the label: a new ETag each.
                label_catalog::touch_documents(conn, tenant_id, &labelled).await?;
                Ok(labelled.len())
            })
            .await;
        match deleted {
            Err(ActionError::Db(error)) if attempts < 3 && is_foreign_key_violation(&error) => {}
            deleted => break deleted?,
        }
    };
    tracing::info!(%tenant_id, label_id = %id, kind = kind.noun(), documents = unlabelled, "label deleted");
    Ok(())
}

fn is_foreign_key_violation(error: &crate::db::DbError) -> bool {
    matches!(
        error,
        crate::db::DbError::Query(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::ForeignKeyViolation,
            _
        ))
    )
}
