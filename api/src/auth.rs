//! Who is calling and what they may do. A user token names a user and a tenant; the
//! member row and capability set say what that user may do there, resolved with the
//! tenant's state in one query per request. The middleware resolves the caller of every
//! tenant route before anything reads the body (so a stranger learns nothing from body
//! errors, and no body is read for them); handlers take the extractor of the permission
//! they need (`DocumentReader`, `DocumentWriter`, `MemberManager`), so a route cannot
//! forget to check; every query they make is scoped to `caller.tenant_id`. Admin routes
//! take an `Operator`, from an operator token (another audience).

use std::future::{Ready, ready};
use std::marker::PhantomData;
use std::ops::Deref;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpMessage, HttpRequest, dev::Payload, web};
use quire_shared::db::members;
use quire_shared::db::tenants::TenantWrite;
use quire_shared::permissions::Permission;
use quire_shared::states::TenantStatus;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Clone)]
pub struct Caller {
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub tenant_status: TenantStatus,
    /// The tenant's generation as the request was let in: every write re-checks it.
    pub tenant_generation: i64,
    pub permissions: Vec<Permission>,
}

impl Caller {
    /// The tenant every write of this request is for: each write re-checks, in its own
    /// transaction, that the tenant still takes it (`actions::hold_tenant`).
    pub fn tenant_write(&self) -> TenantWrite {
        TenantWrite {
            tenant_id: self.tenant_id,
            generation: Some(self.tenant_generation),
        }
    }

    /// The permission must be granted, and the tenant in a state that allows it: reads
    /// while active or suspended, writes only while active.
    fn require(&self, permission: Permission) -> Result<(), ApiError> {
        if !self.permissions.contains(&permission) {
            return Err(ApiError::forbidden(
                "permission_denied",
                format!("this needs the {permission} permission"),
            ));
        }
        match (self.tenant_status, permission) {
            (TenantStatus::Active, _) => Ok(()),
            (TenantStatus::Suspended, Permission::DocumentsRead) => Ok(()),
            (status, _) => Err(ApiError::tenant_refuses(Some(status))),
        }
    }
}

fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(actix_web::http::header::AUTHORIZATION)?;
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn app_state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("app state missing")))
}

/// Resolves the caller of a tenant route, or answers 401/403 before the handler (and its
/// body extractors) run. `routes` wraps the tenant scope in it, and nothing else.
pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let token = bearer(req.request()).map(str::to_owned);
    let resolved = match app_state(req.request()) {
        Ok(state) => resolve(state, token).await,
        Err(error) => Err(error),
    };
    match resolved {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
        }
        Err(error) => {
            let (request, _) = req.into_parts();
            let response = actix_web::ResponseError::error_response(&error);
            return Ok(ServiceResponse::new(request, response).map_into_right_body());
        }
    }
    Ok(next.call(req).await?.map_into_left_body())
}

async fn resolve(state: web::Data<AppState>, token: Option<String>) -> Result<Caller, ApiError> {
    let token = token.ok_or(ApiError::Unauthorized)?;
    let claims = quire_shared::auth::verify(&state.settings.auth, &token)
        .map_err(|_| ApiError::Unauthorized)?;
    let mut conn = state
        .pool
        .get()
        .await
        .map_err(quire_shared::db::DbError::from)?;
    // A token for a tenant that no longer exists is as good as no token.
    let access = members::resolve_access(&mut conn, claims.tid, claims.sub)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let span = tracing::Span::current();
    span.record("tenant_id", tracing::field::display(claims.tid));
    let permissions = access.permissions.ok_or_else(|| {
        ApiError::forbidden(
            "not_a_member",
            "the token's user is not a member of its tenant",
        )
    })?;
    Ok(Caller {
        tenant_id: claims.tid,
        user_id: claims.sub,
        tenant_status: access.tenant_status,
        tenant_generation: access.tenant_generation,
        permissions,
    })
}

/// The permission an extractor demands.
pub trait Requirement {
    const PERMISSION: Permission;
}

pub struct ReadDocuments;
pub struct WriteDocuments;
pub struct ManageMembers;

impl Requirement for ReadDocuments {
    const PERMISSION: Permission = Permission::DocumentsRead;
}
impl Requirement for WriteDocuments {
    const PERMISSION: Permission = Permission::DocumentsWrite;
}
impl Requirement for ManageMembers {
    const PERMISSION: Permission = Permission::MembersManage;
}

/// A caller holding `R`'s permission in a tenant state that allows it.
pub struct Authorized<R> {
    caller: Caller,
    requirement: PhantomData<R>,
}

pub type DocumentReader = Authorized<ReadDocuments>;
pub type DocumentWriter = Authorized<WriteDocuments>;
pub type MemberManager = Authorized<ManageMembers>;

impl<R> Deref for Authorized<R> {
    type Target = Caller;

    fn deref(&self) -> &Caller {
        &self.caller
    }
}

impl<R: Requirement + 'static> FromRequest for Authorized<R> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        // The middleware resolved the caller of every tenant route; a handler outside
        // them that asks for one is refused rather than trusted.
        let caller = req.extensions().get::<Caller>().cloned();
        ready(caller.ok_or(ApiError::Unauthorized).and_then(|caller| {
            caller.require(R::PERMISSION)?;
            Ok(Self {
                caller,
                requirement: PhantomData,
            })
        }))
    }
}

/// An operator, from an operator token (`quire-admin admin-token`) as a bearer token
/// only: never a dashboard session, whose cookie or secret is not a token.
#[derive(Debug, Clone)]
pub struct Operator {
    pub name: String,
}

impl FromRequest for Operator {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let operator = app_state(req).and_then(|state| {
            let token = bearer(req).ok_or(ApiError::Unauthorized)?;
            let claims = quire_shared::auth::verify_admin(&state.settings.auth, token)
                .map_err(|_| ApiError::Unauthorized)?;
            Ok(Operator { name: claims.sub })
        });
        ready(operator)
    }
}
