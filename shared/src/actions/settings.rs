//! A tenant's settings: how its documents' dates are read, Paperless-ngx's
//! `DATE_PARSER_LANGUAGES` and `DATE_ORDER` per tenant. Any member reads them
//! (`GET /api/settings`); a member with `members:manage` changes them (`PATCH`), an
//! operator too (`quire-admin tenant dates`). Each analysis reads them once, when it
//! starts (`date_reading`): a change dates the documents analyzed after it, and a
//! re-analysis dates the others again.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::{ActionError, hold_tenant};
use crate::analysis::dates::{DateLanguage, DateOrder, DateReading, LanguageSet};
use crate::config::AnalysisSettings;
use crate::db::DbError;
use crate::db::date_settings::{self, DatesChange, TenantDates};
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::states::TenantStatus;

/// A tenant's date settings: its own (`None`: the configuration's default) and what the
/// analysis reads its documents with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateSettings {
    pub languages: Option<Vec<DateLanguage>>,
    pub order: Option<DateOrder>,
    pub effective: DateReading,
}

impl DateSettings {
    fn from_row(row: TenantDates, defaults: &AnalysisSettings) -> Self {
        // The columns' CHECKs admit only known codes; an unknown one is skipped, not fatal.
        let languages = row
            .date_languages
            .map(|codes| {
                let parsed: Vec<DateLanguage> = codes
                    .iter()
                    .filter_map(|code| DateLanguage::parse(code))
                    .collect();
                LanguageSet::of(&parsed).languages()
            })
            .filter(|languages| !languages.is_empty());
        let order = row.date_order.as_deref().and_then(DateOrder::parse);
        let effective = DateReading::new(
            languages
                .as_deref()
                .unwrap_or(defaults.date_languages.as_slice()),
            order.unwrap_or(defaults.date_order),
        );
        Self {
            languages,
            order,
            effective,
        }
    }
}

/// A change as its caller names it, unchecked: `None` leaves a setting as it is,
/// `Some(None)` gives it back to the configuration's default.
#[derive(Debug, Clone, Default)]
pub struct DateSettingsChange {
    pub languages: Option<Option<Vec<String>>>,
    pub order: Option<Option<String>>,
}

/// Who changes a tenant's settings.
#[derive(Debug, Clone, Copy)]
pub enum Changer<'a> {
    /// A member, through the API: the tenant must be active, in the generation the
    /// request was let in by.
    Member { tenant: TenantWrite, user_id: Uuid },
    /// An operator: in any state of the tenant.
    Operator { tenant_id: Uuid, name: &'a str },
}

const INVALID: &str = "invalid_settings";

fn invalid(detail: String) -> ActionError {
    ActionError::Invalid {
        code: INVALID,
        detail,
    }
}

/// A value the caller sent, as a refusal quotes it: short, and quoted with escapes.
fn quoted(value: &str) -> String {
    let short: String = value.chars().take(24).collect();
    format!("{short:?}")
}

fn known_languages() -> String {
    DateLanguage::ALL.map(DateLanguage::code).join(", ")
}

/// The change as the columns take it, or `invalid_settings` naming what is wrong.
fn checked(change: DateSettingsChange) -> Result<DatesChange, ActionError> {
    if change.languages.is_none() && change.order.is_none() {
        return Err(invalid(
            "name date_languages, date_order or both (null gives one back to the default)".into(),
        ));
    }
    let date_languages = match change.languages {
        None => None,
        Some(None) => Some(None),
        Some(Some(codes)) => {
            if codes.is_empty() || codes.len() > 4 * DateLanguage::ALL.len() {
                return Err(invalid(format!(
                    "date_languages names 1 to {} of {}; null gives the default",
                    DateLanguage::ALL.len(),
                    known_languages()
                )));
            }
            let mut parsed = Vec::with_capacity(codes.len());
            for code in &codes {
                let language = DateLanguage::parse(code).ok_or_else(|| {
                    invalid(format!(
                        "date_languages: {} is not one of {}",
                        quoted(code),
                        known_languages()
                    ))
                })?;
                parsed.push(language);
            }
            // Each once, in one order: the row says the same whatever order was sent.
            let languages = LanguageSet::of(&parsed).languages();
            Some(Some(
                languages
                    .into_iter()
                    .map(|language| language.code().to_owned())
                    .collect(),
            ))
        }
    };
    let date_order = match change.order {
        None => None,
        Some(None) => Some(None),
        Some(Some(name)) => {
            let order = DateOrder::parse(&name).ok_or_else(|| {
                invalid(format!(
                    "date_order is one of dmy, mdy, ymd; {} is not",
                    quoted(&name)
                ))
            })?;
            Some(Some(order.as_str().to_owned()))
        }
    };
    Ok(DatesChange {
        date_languages,
        date_order,
    })
}

/// The tenant's date settings (`NotFound` for no such tenant).
pub async fn date_settings(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    defaults: &AnalysisSettings,
) -> Result<DateSettings, ActionError> {
    let row = date_settings::find(conn, tenant_id)
        .await?
        .ok_or(ActionError::NotFound)?;
    Ok(DateSettings::from_row(row, defaults))
}

/// How the analysis reads this tenant's dates: its own settings, else the defaults.
pub async fn date_reading(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    defaults: &AnalysisSettings,
) -> Result<DateReading, DbError> {
    let row = date_settings::find(conn, tenant_id)
        .await?
        .unwrap_or_default();
    Ok(DateSettings::from_row(row, defaults).effective)
}

/// Changes what `change` names; `invalid_settings` for an unknown language or order or
/// an empty change, `NotFound` for no such tenant, and a member's change is refused
/// unless the tenant is active in the caller's generation.
pub async fn change_date_settings(
    conn: &mut AsyncPgConnection,
    changer: Changer<'_>,
    change: DateSettingsChange,
    defaults: &AnalysisSettings,
) -> Result<DateSettings, ActionError> {
    let change = checked(change)?;
    let (tenant_id, row) = match changer {
        Changer::Member { tenant, .. } => {
            let row = conn
                .transaction::<_, ActionError, _>(async |conn| {
                    // FOR UPDATE: the UPDATE below takes the row anyway, and two changes
                    // that both held it FOR SHARE first would deadlock upgrading.
                    hold_tenant(conn, &tenant, TenantStatus::Active, TenantLock::Update).await?;
                    date_settings::set(conn, tenant.tenant_id, &change)
                        .await?
                        .ok_or(ActionError::NotFound)
                })
                .await?;
            (tenant.tenant_id, row)
        }
        Changer::Operator { tenant_id, .. } => {
            let row = date_settings::set(conn, tenant_id, &change)
                .await?
                .ok_or(ActionError::NotFound)?;
            (tenant_id, row)
        }
    };
    let settings = DateSettings::from_row(row, defaults);
    let (member, operator) = match changer {
        Changer::Member { user_id, .. } => (Some(user_id), None),
        Changer::Operator { name, .. } => (None, Some(name)),
    };
    tracing::info!(
        %tenant_id, member = ?member, operator = ?operator,
        date_languages = ?settings.languages, date_order = ?settings.order,
        "tenant date settings changed"
    );
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(
        languages: Option<Option<&[&str]>>,
        order: Option<Option<&str>>,
    ) -> DateSettingsChange {
        DateSettingsChange {
            languages: languages.map(|named| {
                named.map(|codes| codes.iter().map(|code| (*code).to_owned()).collect())
            }),
            order: order.map(|named| named.map(str::to_owned)),
        }
    }

    fn refusal(change: DateSettingsChange) -> String {
        match checked(change) {
            Err(ActionError::Invalid { code, detail }) => {
                assert_eq!(code, INVALID);
                detail
            }
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_change_is_checked_and_said_the_same_way_whatever_its_spelling() {
        let checked = checked(change(
            Some(Some(&["NL", "de", "nl"][..])),
            Some(Some("MDY")),
        ))
        .expect("valid");
        assert_eq!(
            checked,
            DatesChange {
                date_languages: Some(Some(vec!["de".into(), "nl".into()])),
                date_order: Some(Some("mdy".into())),
            }
        );
        let back = super::checked(change(Some(None), None)).expect("valid");
        assert_eq!(back.date_languages, Some(None));
        assert_eq!(back.date_order, None);
    }

    #[test]
    fn what_is_wrong_is_named() {
        assert!(refusal(change(None, None)).contains("name date_languages"));
        assert!(refusal(change(Some(Some(&[][..])), None)).contains("1 to 7"));
        let detail = refusal(change(Some(Some(&["en", "klingon"][..])), None));
        assert!(
            detail.contains("\"klingon\" is not one of en, de"),
            "{detail}"
        );
        let detail = refusal(change(None, Some(Some("dym"))));
        assert!(
            detail.contains("date_order is one of dmy, mdy, ymd"),
            "{detail}"
        );
        let long = "x".repeat(10_000);
        assert!(refusal(change(None, Some(Some(&long)))).len() < 100);
    }
}
