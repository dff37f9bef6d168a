//! The tenant's tags and correspondents with their matching rules: list and get need
//! `documents:read`; create, change and delete need `documents:write`. Each handler
//! decodes the request and calls `actions::labels`.

use actix_web::{HttpResponse, web};
use quire_shared::actions::labels::{self as label_actions, LabelChange, NewLabel};
use quire_shared::db::label_catalog::LabelKind;
use quire_shared::matching::{MatchAlgorithm, Rule};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::edit::{CorrespondentName, TagName};
use crate::auth::{DocumentReader, DocumentWriter};
use crate::error::ApiError;
use crate::json_object::JsonObject;
use crate::state::AppState;
use crate::views::{LabelView, ProblemView};

/// A rule's algorithm, as the OpenAPI document names them (`MatchAlgorithm`'s names).
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // describes the names for the OpenAPI document only
pub enum AlgorithmName {
    None,
    Any,
    All,
    Exact,
    Regex,
    Fuzzy,
}

/// A matching rule as a client sends it (the whole rule: fields left out take their
/// defaults).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleBody {
    /// `none` (only users set the label), `any` (any word), `all` (all words), `exact`
    /// (the phrase), `regex` (a regular expression, Rust `regex` syntax) or `fuzzy` (a
    /// phrase at least 90 % similar).
    #[schema(value_type = AlgorithmName, example = "any")]
    algorithm: MatchAlgorithm,
    /// At most 256 characters (64 for `fuzzy`); words are letters and digits, a
    /// `"quoted phrase"` is one term of `any` and `all`. Every algorithm but `none`
    /// needs a word (a `regex` an expression that compiles within the limits): what a
    /// schema cannot say is answered 422 `invalid_rule` / `invalid_regex` /
    /// `regex_too_large`.
    #[serde(default)]
    #[schema(max_length = 256)]
    text: String,
    #[serde(default = "case_insensitive_by_default")]
    case_insensitive: bool,
}

fn case_insensitive_by_default() -> bool {
    true
}

impl From<RuleBody> for Rule {
    fn from(body: RuleBody) -> Self {
        Self {
            algorithm: body.algorithm,
            text: body.text,
            case_insensitive: body.case_insensitive,
        }
    }
}

/// `POST /api/tags`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTagBody {
    /// At most 100 characters as sent, not blank once trimmed, no control characters.
    #[schema(value_type = TagName)]
    name: String,
    /// Without one, the tag has rule `none`.
    rule: Option<RuleBody>,
}

/// `POST /api/correspondents`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCorrespondentBody {
    /// At most 200 characters as sent, not blank once trimmed, no control characters.
    #[schema(value_type = CorrespondentName)]
    name: String,
    /// Without one, the correspondent has rule `none`.
    rule: Option<RuleBody>,
}

/// `PATCH /api/tags/{tag_id}`; a field left out is kept.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TagPatch {
    #[schema(value_type = Option<TagName>)]
    name: Option<String>,
    /// Replaces the rule; it applies from each document's next analysis.
    rule: Option<RuleBody>,
}

/// `PATCH /api/correspondents/{correspondent_id}`; a field left out is kept.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CorrespondentPatch {
    #[schema(value_type = Option<CorrespondentName>)]
    name: Option<String>,
    /// Replaces the rule; it applies from each document's next analysis.
    rule: Option<RuleBody>,
}

impl From<NewTagBody> for NewLabel {
    fn from(body: NewTagBody) -> Self {
        Self {
            name: body.name,
            rule: body.rule.map(Rule::from).unwrap_or_default(),
        }
    }
}

impl From<NewCorrespondentBody> for NewLabel {
    fn from(body: NewCorrespondentBody) -> Self {
        Self {
            name: body.name,
            rule: body.rule.map(Rule::from).unwrap_or_default(),
        }
    }
}

impl From<TagPatch> for LabelChange {
    fn from(body: TagPatch) -> Self {
        Self {
            name: body.name,
            rule: body.rule.map(Rule::from),
        }
    }
}

impl From<CorrespondentPatch> for LabelChange {
    fn from(body: CorrespondentPatch) -> Self {
        Self {
            name: body.name,
            rule: body.rule.map(Rule::from),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct LabelPage {
    after: Option<String>,
    limit: Option<i64>,
}

const DEFAULT_LIMIT: i64 = 100;

async fn list(
    state: web::Data<AppState>,
    tenant_id: Uuid,
    kind: LabelKind,
    page: LabelPage,
) -> Result<HttpResponse, ApiError> {
    let limit = page.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=label_actions::MAX_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_limit",
            format!("limit is between 1 and {}", label_actions::MAX_PAGE),
        ));
    }
    let mut conn = state.connection().await?;
    let labels =
        label_actions::list(&mut conn, tenant_id, kind, page.after.as_deref(), limit).await?;
    let next_after = (labels.len() as i64 == limit)
        .then(|| labels.last().map(|label| label.name.clone()))
        .flatten();
    let views: Vec<LabelView> = labels.into_iter().map(LabelView::from).collect();
    let key = match kind {
        LabelKind::Tag => "tags",
        LabelKind::Correspondent => "correspondents",
    };
    let mut body = serde_json::Map::new();
    body.insert(key.to_owned(), json!(views));
    body.insert("next_after".to_owned(), json!(next_after));
    Ok(HttpResponse::Ok().json(body))
}

async fn get(
    state: web::Data<AppState>,
    tenant_id: Uuid,
    kind: LabelKind,
    id: Uuid,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let label = label_actions::get(&mut conn, tenant_id, kind, id).await?;
    Ok(HttpResponse::Ok().json(LabelView::from(label)))
}

async fn create(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    kind: LabelKind,
    new: NewLabel,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let label = label_actions::create(&mut conn, &caller.tenant_write(), kind, new).await?;
    Ok(HttpResponse::Created().json(LabelView::from(label)))
}

async fn patch(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    kind: LabelKind,
    id: Uuid,
    change: LabelChange,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let label = label_actions::change(&mut conn, &caller.tenant_write(), kind, id, change).await?;
    Ok(HttpResponse::Ok().json(LabelView::from(label)))
}

async fn delete(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    kind: LabelKind,
    id: Uuid,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    label_actions::delete(&mut conn, &caller.tenant_write(), kind, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    get, path = "/api/tags", tag = "labels", operation_id = "list_tags",
    params(
        ("after" = Option<String>, Query, description = "names after this one: the previous page's next_after"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 1000, description = "1 to 1000, default 100"),
    ),
    responses(
        (status = 200, description = "{tags: [...], next_after}: the tenant's tags by name, each with its matching rule"),
        (status = 400, description = "invalid_limit", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no documents:read", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list_tags(
    state: web::Data<AppState>,
    caller: DocumentReader,
    page: web::Query<LabelPage>,
) -> Result<HttpResponse, ApiError> {
    list(state, caller.tenant_id, LabelKind::Tag, page.into_inner()).await
}

#[utoipa::path(
    post, path = "/api/tags", tag = "labels", operation_id = "create_tag", request_body = NewTagBody,
    responses(
        (status = 201, description = "created", body = LabelView),
        (status = 409, description = "tag_name_taken", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_tags (the name), invalid_rule, invalid_regex, regex_too_large (past the compiled-size limit), too_many_rules (200 tags with a rule per tenant)", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn create_tag(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    body: JsonObject<NewTagBody>,
) -> Result<HttpResponse, ApiError> {
    create(state, caller, LabelKind::Tag, body.0.into()).await
}

#[utoipa::path(
    get, path = "/api/tags/{tag_id}", tag = "labels", operation_id = "get_tag",
    params(("tag_id" = Uuid, Path, description = "tag id")),
    responses(
        (status = 200, description = "the tag", body = LabelView),
        (status = 404, description = "no such tag in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no documents:read", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get_tag(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    get(state, caller.tenant_id, LabelKind::Tag, path.into_inner()).await
}

#[utoipa::path(
    patch, path = "/api/tags/{tag_id}", tag = "labels", operation_id = "edit_tag",
    params(("tag_id" = Uuid, Path, description = "tag id")),
    request_body = TagPatch,
    responses(
        (status = 200, description = "changed; a new rule applies from each document's next analysis (POST /api/documents/reanalyze applies it now)", body = LabelView),
        (status = 404, description = "no such tag in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "tag_name_taken", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_tags, invalid_rule, invalid_regex, regex_too_large, too_many_rules", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn patch_tag(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<Uuid>,
    body: JsonObject<TagPatch>,
) -> Result<HttpResponse, ApiError> {
    patch(
        state,
        caller,
        LabelKind::Tag,
        path.into_inner(),
        body.0.into(),
    )
    .await
}

#[utoipa::path(
    delete, path = "/api/tags/{tag_id}", tag = "labels", operation_id = "delete_tag",
    params(("tag_id" = Uuid, Path, description = "tag id")),
    responses(
        (status = 204, description = "deleted, and taken off every document"),
        (status = 404, description = "no such tag in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn delete_tag(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    delete(state, caller, LabelKind::Tag, path.into_inner()).await
}

#[utoipa::path(
    get, path = "/api/correspondents", tag = "labels", operation_id = "list_correspondents",
    params(
        ("after" = Option<String>, Query, description = "names after this one: the previous page's next_after"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 1000, description = "1 to 1000, default 100"),
    ),
    responses(
        (status = 200, description = "{correspondents: [...], next_after}: the tenant's correspondents by name, each with its matching rule"),
        (status = 400, description = "invalid_limit", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no documents:read", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list_correspondents(
    state: web::Data<AppState>,
    caller: DocumentReader,
    page: web::Query<LabelPage>,
) -> Result<HttpResponse, ApiError> {
    list(
        state,
        caller.tenant_id,
        LabelKind::Correspondent,
        page.into_inner(),
    )
    .await
}

#[utoipa::path(
    post, path = "/api/correspondents", tag = "labels", operation_id = "create_correspondent", request_body = NewCorrespondentBody,
    responses(
        (status = 201, description = "created", body = LabelView),
        (status = 409, description = "correspondent_name_taken", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_correspondent (the name), invalid_rule, invalid_regex, regex_too_large (past the compiled-size limit), too_many_rules (200 correspondents with a rule per tenant)", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn create_correspondent(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    body: JsonObject<NewCorrespondentBody>,
) -> Result<HttpResponse, ApiError> {
    create(state, caller, LabelKind::Correspondent, body.0.into()).await
}

#[utoipa::path(
    get, path = "/api/correspondents/{correspondent_id}", tag = "labels", operation_id = "get_correspondent",
    params(("correspondent_id" = Uuid, Path, description = "correspondent id")),
    responses(
        (status = 200, description = "the correspondent", body = LabelView),
        (status = 404, description = "no such correspondent in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no documents:read", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get_correspondent(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    get(
        state,
        caller.tenant_id,
        LabelKind::Correspondent,
        path.into_inner(),
    )
    .await
}

#[utoipa::path(
    patch, path = "/api/correspondents/{correspondent_id}", tag = "labels", operation_id = "edit_correspondent",
    params(("correspondent_id" = Uuid, Path, description = "correspondent id")),
    request_body = CorrespondentPatch,
    responses(
        (status = 200, description = "changed; a new rule applies from each document's next analysis (POST /api/documents/reanalyze applies it now)", body = LabelView),
        (status = 404, description = "no such correspondent in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "correspondent_name_taken", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_correspondent, invalid_rule, invalid_regex, regex_too_large, too_many_rules", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn patch_correspondent(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<Uuid>,
    body: JsonObject<CorrespondentPatch>,
) -> Result<HttpResponse, ApiError> {
    patch(
        state,
        caller,
        LabelKind::Correspondent,
        path.into_inner(),
        body.0.into(),
    )
    .await
}

#[utoipa::path(
    delete, path = "/api/correspondents/{correspondent_id}", tag = "labels", operation_id = "delete_correspondent",
    params(("correspondent_id" = Uuid, Path, description = "correspondent id")),
    responses(
        (status = 204, description = "deleted, and taken off every document"),
        (status = 404, description = "no such correspondent in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn delete_correspondent(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    delete(state, caller, LabelKind::Correspondent, path.into_inner()).await
}
