//! Route table: one macro call lists every route once, and generates both the actix
//! configuration and `ROUTES`, which a test compares with the OpenAPI document. Every
//! path is a resource whose other methods answer 405 problem+json.

mod admin_tenants;
mod bulk;
mod catalogue;
mod content;
mod documents;
mod edit;
mod health;
mod jobs;
mod listing;
mod members;
mod openapi;
mod trash;

use actix_web::{HttpResponse, Resource, web};

use crate::error::ApiError;

pub(crate) use documents::connection;
pub use openapi::ApiDoc;

async fn method_not_allowed() -> Result<HttpResponse, ApiError> {
    Err(ApiError::MethodNotAllowed)
}

fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

macro_rules! route_table {
    ($( $path:literal { $( $method:ident => $handler:path ),+ $(,)? } )+) => {
        /// Every (method, path) the service answers, as actix matches them.
        pub const ROUTES: &[(&str, &str)] = &[ $( $( (stringify!($method), $path), )+ )+ ];

        pub fn configure(cfg: &mut web::ServiceConfig) {
            $( cfg.service(resource($path) $( .route(web::$method().to($handler)) )+ ); )+
        }
    };
}

route_table! {
    "/healthz" { get => health::healthz }
    "/readyz" { get => health::readyz }
    "/metrics" { get => health::metrics }
    "/api/documents" { post => documents::upload, get => listing::list }
    // Before "/api/documents/{document_id}", which would take "reanalyze" for an id.
    "/api/documents/reanalyze" { post => bulk::reanalyze }
    "/api/documents/verify" { post => bulk::verify }
    "/api/documents/{document_id}" { get => documents::get, patch => edit::patch, delete => trash::trash }
    "/api/documents/{document_id}/restore" { post => trash::restore }
    "/api/documents/{document_id}/content" { get => content::content }
    "/api/documents/{document_id}/thumbnail" { get => content::thumbnail }
    "/api/documents/{document_id}/processing-jobs" { get => jobs::list }
    "/api/documents/{document_id}/processing-jobs/{job_id}" { get => jobs::get }
    "/api/documents/{document_id}/processing-jobs/{job_id}/retry" { post => jobs::retry }
    "/api/jobs/catalogue" { get => catalogue::catalogue }
    "/api/members" { get => members::list, post => members::add }
    "/api/members/{user_id}" { patch => members::change, delete => members::remove }
    "/api/admin/tenants" { get => admin_tenants::list, post => admin_tenants::create }
    "/api/admin/tenants/{tenant_id}" { get => admin_tenants::get }
    "/api/admin/tenants/{tenant_id}/suspend" { post => admin_tenants::suspend }
    "/api/admin/tenants/{tenant_id}/activate" { post => admin_tenants::activate }
    "/api/admin/tenants/{tenant_id}/deletion" { post => admin_tenants::request_deletion }
    "/api/openapi.json" { get => openapi::document }
    "/api/docs" { get => openapi::swagger_ui }
    "/api/docs/init.js" { get => openapi::swagger_init }
    "/api/docs/swagger-ui.css" { get => openapi::swagger_css }
    "/api/docs/swagger-ui-bundle.js" { get => openapi::swagger_js }
}

/// Routes that serve the API's own documentation rather than the API.
pub const DOCUMENTATION_ROUTES: &[&str] = &[
    "/api/openapi.json",
    "/api/docs",
    "/api/docs/init.js",
    "/api/docs/swagger-ui.css",
    "/api/docs/swagger-ui-bundle.js",
];
