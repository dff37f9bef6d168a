//! The caller of a request, from its bearer token. Every query a handler makes is scoped
//! to `caller.tenant_id`.

use std::future::Future;
use std::pin::Pin;

use actix_web::{FromRequest, HttpRequest, dev::Payload, web};
use quire_shared::db::tenants;
use quire_shared::states::TenantStatus;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Clone)]
pub struct Caller {
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub tenant_status: TenantStatus,
}

impl Caller {
    /// Writes need an active tenant.
    pub fn require_active_tenant(&self) -> Result<(), ApiError> {
        if self.tenant_status == TenantStatus::Active {
            Ok(())
        } else {
            Err(ApiError::TenantInactive)
        }
    }
}

fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(actix_web::http::header::AUTHORIZATION)?;
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let token = bearer(req).map(str::to_owned);
        Box::pin(async move {
            let state =
                state.ok_or_else(|| ApiError::Internal(anyhow::anyhow!("app state missing")))?;
            let token = token.ok_or(ApiError::Unauthorized)?;
            let claims = quire_shared::auth::verify(&state.settings.auth, &token)
                .map_err(|_| ApiError::Unauthorized)?;
            let mut conn = state
                .pool
                .get()
                .await
                .map_err(quire_shared::db::DbError::from)?;
            // A token for a tenant that no longer exists is as good as no token.
            let tenant = tenants::find_tenant(&mut conn, claims.tid)
                .await?
                .ok_or(ApiError::Unauthorized)?;
            tracing::Span::current().record("tenant_id", tracing::field::display(tenant.id));
            Ok(Caller {
                tenant_id: tenant.id,
                user_id: claims.sub,
                tenant_status: tenant.status,
            })
        })
    }
}
