//! The caller's tenant's settings: how the analysis reads its documents' dates (the
//! languages of month names, the order of an ambiguous numeric date). Any member reads
//! them; changing them needs `members:manage` (owners). A change dates the documents
//! analyzed after it; re-analyze the others to date them again.

use actix_web::{HttpResponse, web};
use quire_shared::actions::settings::{self, Changer, DateSettings, DateSettingsChange};
use serde::{Deserialize, Serialize};

use crate::auth::{DocumentReader, MemberManager};
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::ProblemView;

/// A tenant's settings: its own values (`null`: the configuration's default) and what
/// the analysis uses.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SettingsView {
    /// The languages month names are read in (`en`, `de`, `fr`, `es`, `it`, `nl`,
    /// `pt`); `null`: the configuration's `analysis.date_languages`.
    #[schema(value_type = Option<Vec<String>>, example = json!(["de", "en"]))]
    date_languages: Option<Vec<String>>,
    /// How `03/04/2024` is read: `dmy`, `mdy` or `ymd`; `null`: the configuration's
    /// `analysis.date_order`.
    #[schema(value_type = Option<String>, example = "dmy")]
    date_order: Option<String>,
    effective: EffectiveDates,
}

/// What the analysis reads this tenant's dates with.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EffectiveDates {
    #[schema(example = json!(["de", "en"]))]
    date_languages: Vec<String>,
    #[schema(example = "dmy")]
    date_order: String,
}

impl From<DateSettings> for SettingsView {
    fn from(settings: DateSettings) -> Self {
        let codes = |languages: Vec<quire_shared::analysis::dates::DateLanguage>| -> Vec<String> {
            languages
                .into_iter()
                .map(|language| language.code().to_owned())
                .collect()
        };
        Self {
            date_languages: settings.languages.map(codes),
            date_order: settings.order.map(|order| order.as_str().to_owned()),
            effective: EffectiveDates {
                date_languages: codes(settings.effective.languages.languages()),
                date_order: settings.effective.order.as_str().to_owned(),
            },
        }
    }
}

/// Absent: unchanged; `null`: back to the configuration's default.
fn named<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The settings to change; name at least one (`minProperties: 1`, set by the document's
/// `AtLeastOneSetting`: utoipa 5.5 writes `min_properties` as `maxProperties`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    /// 1 to 7 of `en`, `de`, `fr`, `es`, `it`, `nl`, `pt` (any case, any order, a code
    /// named twice counts once, at most 28 entries); `null`: the configuration's default.
    #[serde(default, deserialize_with = "named")]
    #[schema(value_type = Option<Vec<DateLanguageCode>>, min_items = 1, max_items = 28, example = json!(["de", "en"]))]
    date_languages: Option<Option<Vec<String>>>,
    /// `dmy`, `mdy` or `ymd` (any case); `null`: the configuration's default.
    #[serde(default, deserialize_with = "named")]
    #[schema(
        value_type = Option<String>,
        pattern = r"^[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:[Dd][Mm][Yy]|[Mm][Dd][Yy]|[Yy][Mm][Dd])[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$",
        example = "mdy"
    )]
    date_order: Option<Option<String>>,
}

/// A language code as `SettingsPatch::date_languages` takes it: the pattern says what
/// `DateLanguage::parse` takes (surrounding whitespace trimmed, any letter case).
pub struct DateLanguageCode;

impl utoipa::PartialSchema for DateLanguageCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some(
                r"^[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:[Ee][Nn]|[Dd][Ee]|[Ff][Rr]|[Ee][Ss]|[Ii][Tt]|[Nn][Ll]|[Pp][Tt])[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$",
            ))
            .into()
    }
}

impl utoipa::ToSchema for DateLanguageCode {}

#[utoipa::path(
    get, path = "/api/settings", tag = "settings", operation_id = "get_settings",
    responses(
        (status = 200, description = "the tenant's settings and what the analysis uses", body = SettingsView),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no documents:read", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: DocumentReader,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let found =
        settings::date_settings(&mut conn, caller.tenant_id, &state.settings.analysis).await?;
    Ok(HttpResponse::Ok().json(SettingsView::from(found)))
}

#[utoipa::path(
    patch, path = "/api/settings", tag = "settings", operation_id = "edit_settings",
    request_body = SettingsPatch,
    responses(
        (status = 200, description = "changed; documents analyzed from now on are dated with them", body = SettingsView),
        (status = 400, description = "invalid_json: not the JSON this route takes (an unknown member, a number for a code)", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_settings: an unknown language or date order, an empty language list, or nothing named", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn patch(
    state: web::Data<AppState>,
    caller: MemberManager,
    body: crate::json_object::JsonObject<SettingsPatch>,
) -> Result<HttpResponse, ApiError> {
    let SettingsPatch {
        date_languages,
        date_order,
    } = body.0;
    let mut conn = state.connection().await?;
    let changed = settings::change_date_settings(
        &mut conn,
        Changer::Member {
            tenant: caller.tenant_write(),
            user_id: caller.user_id,
        },
        DateSettingsChange {
            languages: date_languages,
            order: date_order,
        },
        &state.settings.analysis,
    )
    .await?;
    Ok(HttpResponse::Ok().json(SettingsView::from(changed)))
}
