//! The OpenAPI 3.1 document, generated from the handlers' annotations, and a Swagger UI
//! served from vendored assets (nothing is fetched from a CDN, at build or run time).

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{
    bulk, catalogue, content, documents, edit, events, health, jobs, labels, listing, members,
    operator_queues, operator_tenants, settings, trash, versions, webhooks,
};
use crate::views::{
    AppliedLabelView, DocumentLabelsView, DocumentView, JobView, LabelView, MemberView,
    ProblemView, RuleView, SearchView, TenantJobView, TenantView, UploadForm, UploadView,
    VersionView,
};
use crate::views::{DocumentVersionView, VersionForm, VersionListView, VersionUploadView};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Quire API",
        description = "Multi-tenant document intake and processing. Every error is \
                       application/problem+json with a stable `code` and the `request_id`."
    ),
    paths(
        documents::upload,
        listing::list,
        bulk::reanalyze,
        bulk::verify,
        documents::get,
        edit::patch,
        trash::trash,
        trash::restore,
        content::content,
        content::thumbnail,
        content::archive,
        versions::upload,
        versions::list,
        versions::content,
        jobs::list,
        jobs::get,
        jobs::retry,
        catalogue::catalogue,
        labels::list_tags,
        labels::create_tag,
        labels::get_tag,
        labels::patch_tag,
        labels::delete_tag,
        labels::list_correspondents,
        labels::create_correspondent,
        labels::get_correspondent,
        labels::patch_correspondent,
        labels::delete_correspondent,
        members::list,
        members::add,
        members::change,
        members::remove,
        webhooks::list,
        webhooks::create,
        webhooks::get,
        webhooks::patch,
        webhooks::delete,
        webhooks::deliveries,
        webhooks::redeliver,
        events::subscribe,
        settings::get,
        settings::patch,
        operator_tenants::create,
        operator_tenants::list,
        operator_tenants::get,
        operator_tenants::suspend,
        operator_tenants::activate,
        operator_tenants::request_deletion,
        operator_tenants::limits,
        operator_tenants::pause,
        operator_tenants::resume,
        operator_queues::list,
        operator_queues::pause,
        operator_queues::resume,
        health::healthz,
        health::readyz,
    ),
    components(schemas(
        DocumentView,
        SearchView,
        VersionView,
        DocumentVersionView,
        VersionListView,
        VersionUploadView,
        VersionForm,
        JobView,
        UploadView,
        UploadForm,
        ProblemView,
        edit::DocumentPatch,
        DocumentLabelsView,
        AppliedLabelView,
        LabelView,
        RuleView,
        labels::NewLabelBody,
        labels::LabelPatch,
        labels::RuleBody,
        bulk::ReanalyzeRequest,
        bulk::VerifyRequest,
        members::NewMember,
        members::MemberPatch,
        MemberView,
        TenantView,
        TenantJobView,
        operator_tenants::NewTenant,
        operator_tenants::LimitsPatch,
        operator_queues::QueueView,
        webhooks::NewWebhookBody,
        webhooks::WebhookPatchBody,
        webhooks::WebhookView,
        webhooks::CreatedWebhookView,
        webhooks::DeliveryView,
        settings::SettingsView,
        settings::EffectiveDates,
        settings::SettingsPatch
    )),
    modifiers(&BearerToken),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT (HS256)")
                    .build(),
            ),
        );
    }
}

/// `GET /api/openapi.json`.
pub async fn document() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}

const SWAGGER_HTML: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Quire API</title>
<link rel="stylesheet" href="/api/docs/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/api/docs/swagger-ui-bundle.js"></script>
<script src="/api/docs/init.js"></script></body>
</html>
"#;
const SWAGGER_INIT: &str =
    "window.ui = SwaggerUIBundle({ url: '/api/openapi.json', dom_id: '#swagger-ui' });\n";
const SWAGGER_CSS: &[u8] = include_bytes!("../../assets/swagger-ui/swagger-ui.css");
const SWAGGER_JS: &[u8] = include_bytes!("../../assets/swagger-ui/swagger-ui-bundle.js");

/// Scripts only from this origin, no inline code.
const CSP: &str =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:";

fn asset(content_type: &str, body: &'static [u8]) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("Cache-Control", "public, max-age=86400"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(body)
}

/// `GET /api/docs`: Swagger UI.
pub async fn swagger_ui() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Content-Security-Policy", CSP))
        .body(SWAGGER_HTML)
}

pub async fn swagger_init() -> HttpResponse {
    asset(
        "application/javascript; charset=utf-8",
        SWAGGER_INIT.as_bytes(),
    )
}

pub async fn swagger_css() -> HttpResponse {
    asset("text/css; charset=utf-8", SWAGGER_CSS)
}

pub async fn swagger_js() -> HttpResponse {
    asset("application/javascript; charset=utf-8", SWAGGER_JS)
}
