//! Route table: one macro call lists every route once, and generates both the actix
//! configuration and `ROUTES`, which a test compares with the OpenAPI document. Every
//! path is a resource whose other methods answer 405 problem+json.

mod bulk;
mod catalogue;
mod content;
mod documents;
mod edit;
mod events;
mod health;
mod jobs;
mod labels;
mod listing;
mod members;
mod openapi;
mod operator_queues;
mod operator_tenants;
mod search;
mod settings;
mod trash;
mod versions;
mod webhooks;

use actix_web::{HttpResponse, Resource, web};

use crate::error::ApiError;

pub use openapi::ApiDoc;

/// A resource whose other methods answer 405 with `Allow` naming `methods` (RFC 9110
/// §15.5.6): exactly the methods the route table, and so the OpenAPI document, lists.
fn resource(path: &str, methods: &[&str]) -> Resource {
    let allow = methods
        .iter()
        .map(|method| method.to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join(", ");
    web::resource(path).default_service(web::to(move || {
        let allow = Some(allow.clone());
        async move { Err::<HttpResponse, ApiError>(ApiError::MethodNotAllowed { allow }) }
    }))
}

/// The tenant routes answer 401 before their handler (and its body extractors) run.
fn tenant_scope(
    prefix: &str,
) -> actix_web::Scope<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    web::scope(prefix)
        .wrap(actix_web::middleware::from_fn(crate::auth::middleware))
        .default_service(web::to(not_found))
}

async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound)
}

/// Three kinds of route: open ones (health, the API's documentation), the
/// operator's (their extractor checks the operator token), and the tenant's, under
/// `/api` inside the tenant middleware, which resolves the caller first.
macro_rules! route_table {
    (
        open { $( $open_path:literal { $( $open_method:ident => $open_handler:path ),+ $(,)? } )+ }
        operator $operator_prefix:literal { $( $operator_path:literal { $( $operator_method:ident => $operator_handler:path ),+ $(,)? } )+ }
        tenant $tenant_prefix:literal { $( $tenant_path:literal { $( $tenant_method:ident => $tenant_handler:path ),+ $(,)? } )+ }
    ) => {
        /// Every (method, path) the service answers, as actix matches them.
        pub const ROUTES: &[(&str, &str)] = &[
            $( $( (stringify!($open_method), $open_path), )+ )+
            $( $( (stringify!($operator_method), concat!($operator_prefix, $operator_path)), )+ )+
            $( $( (stringify!($tenant_method), concat!($tenant_prefix, $tenant_path)), )+ )+
        ];

        pub fn configure(cfg: &mut web::ServiceConfig) {
            $( cfg.service(resource($open_path, &[$(stringify!($open_method)),+]) $( .route(web::$open_method().to($open_handler)) )+ ); )+
            cfg.service(
                web::scope($operator_prefix)
                    $( .service(resource($operator_path, &[$(stringify!($operator_method)),+]) $( .route(web::$operator_method().to($operator_handler)) )+ ) )+
                    .default_service(web::to(not_found)),
            );
            cfg.service(
                tenant_scope($tenant_prefix)
                    $( .service(resource($tenant_path, &[$(stringify!($tenant_method)),+]) $( .route(web::$tenant_method().to($tenant_handler)) )+ ) )+
            );
        }
    };
}

route_table! {
    open {
        "/healthz" { get => health::healthz }
        "/readyz" { get => health::readyz }
        "/api/openapi.json" { get => openapi::document }
        "/api/docs" { get => openapi::swagger_ui }
        "/api/docs/init.js" { get => openapi::swagger_init }
        "/api/docs/swagger-ui.css" { get => openapi::swagger_css }
        "/api/docs/swagger-ui-bundle.js" { get => openapi::swagger_js }
    }
    operator "/api/admin" {
        "/tenants" { get => operator_tenants::list, post => operator_tenants::create }
        "/tenants/{tenant_id}" { get => operator_tenants::get }
        "/tenants/{tenant_id}/suspend" { post => operator_tenants::suspend }
        "/tenants/{tenant_id}/activate" { post => operator_tenants::activate }
        "/tenants/{tenant_id}/deletion" { post => operator_tenants::request_deletion }
        "/tenants/{tenant_id}/limits" { patch => operator_tenants::limits }
        "/tenants/{tenant_id}/pause" { post => operator_tenants::pause }
        "/tenants/{tenant_id}/resume" { post => operator_tenants::resume }
        "/queues" { get => operator_queues::list }
        "/queues/{queue}/pause" { post => operator_queues::pause }
        "/queues/{queue}/resume" { post => operator_queues::resume }
    }
    tenant "/api" {
        "/documents" { post => documents::upload, get => listing::list }
        // Before "/documents/{document_id}", which would take "reanalyze" for an id.
        "/documents/reanalyze" { post => bulk::reanalyze }
        "/documents/verify" { post => bulk::verify }
        "/documents/search" { get => search::search }
        "/documents/{document_id}" { get => documents::get, patch => edit::patch, delete => trash::trash }
        "/documents/{document_id}/restore" { post => trash::restore }
        "/documents/{document_id}/content" { get => content::content }
        "/documents/{document_id}/thumbnail" { get => content::thumbnail }
        "/documents/{document_id}/archive" { get => content::archive }
        "/documents/{document_id}/versions" { post => versions::upload, get => versions::list }
        "/documents/{document_id}/versions/{version_id}/content" { get => versions::content }
        "/documents/{document_id}/processing-jobs" { get => jobs::list }
        "/documents/{document_id}/processing-jobs/{job_id}" { get => jobs::get }
        "/documents/{document_id}/processing-jobs/{job_id}/retry" { post => jobs::retry }
        "/jobs/catalogue" { get => catalogue::catalogue }
        "/tags" { get => labels::list_tags, post => labels::create_tag }
        "/tags/{tag_id}" { get => labels::get_tag, patch => labels::patch_tag, delete => labels::delete_tag }
        "/correspondents" { get => labels::list_correspondents, post => labels::create_correspondent }
        "/correspondents/{correspondent_id}" { get => labels::get_correspondent, patch => labels::patch_correspondent, delete => labels::delete_correspondent }
        "/members" { get => members::list, post => members::add }
        "/members/{user_id}" { patch => members::change, delete => members::remove }
        "/webhooks" { get => webhooks::list, post => webhooks::create }
        "/webhooks/{webhook_id}" { get => webhooks::get, patch => webhooks::patch, delete => webhooks::delete }
        "/webhooks/{webhook_id}/deliveries" { get => webhooks::deliveries }
        "/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver" { post => webhooks::redeliver }
        "/events" { get => events::subscribe }
        "/settings" { get => settings::get, patch => settings::patch }
    }
}

/// Routes that answer an endless stream (text/event-stream): a walk that reads every
/// body to its end takes their refusals only (their own tests read them).
pub const STREAMING_ROUTES: &[&str] = &["/api/events"];

/// Routes that serve the API's own documentation rather than the API.
pub const DOCUMENTATION_ROUTES: &[&str] = &[
    "/api/openapi.json",
    "/api/docs",
    "/api/docs/init.js",
    "/api/docs/swagger-ui.css",
    "/api/docs/swagger-ui-bundle.js",
];
