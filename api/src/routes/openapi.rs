//! The OpenAPI 3.1 document, generated from the handlers' annotations, and a Swagger UI
//! served from vendored assets (nothing is fetched from a CDN, at build or run time).

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{
    bulk, catalogue, content, documents, edit, events, health, jobs, labels, listing, members,
    operator_queues, operator_tenants, search, settings, trash, versions, webhooks,
};
use crate::views::{
    AppliedLabelView, BulkResultView, BulkView, DocumentLabelsView, DocumentPage, DocumentView,
    EditView, FileBytes, JobList, JobView, LabelView, MemberView, ProblemView, PurgeView, RuleView,
    SearchView, SnippetPartView, TenantJobView, TenantView, TrashView, UploadForm, UploadView,
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
        search::search,
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
        DocumentPage,
        SearchView,
        SnippetPartView,
        JobList,
        EditView,
        TrashView,
        PurgeView,
        BulkView,
        BulkResultView,
        FileBytes,
        edit::TagName,
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
        labels::NewTagBody,
        labels::NewCorrespondentBody,
        labels::TagPatch,
        labels::CorrespondentPatch,
        labels::RuleBody,
        labels::AlgorithmName,
        edit::CorrespondentName,
        bulk::ReanalyzeRequest,
        bulk::VerifyRequest,
        members::NewMember,
        members::MemberPatch,
        MemberView,
        crate::views::CapabilitySetName,
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
        webhooks::WebhookList,
        webhooks::DeliveryList,
        webhooks::EventTypeName,
        events::StreamEvent,
        settings::SettingsView,
        settings::DateLanguageCode,
        settings::EffectiveDates,
        settings::SettingsPatch
    )),
    modifiers(&BearerToken, &SharedAnswers, &AtLeastOneSetting),
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

/// A settings change names at least one setting (an empty one is 422). utoipa 5.5
/// writes its `min_properties` attribute out as `maxProperties`, so it is set here.
struct AtLeastOneSetting;

impl Modify for AtLeastOneSetting {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::Schema;
        let patch = openapi
            .components
            .as_mut()
            .and_then(|components| components.schemas.get_mut("SettingsPatch"));
        if let Some(RefOr::T(Schema::Object(patch))) = patch {
            patch.min_properties = Some(1);
        }
    }
}

/// What the layers every route shares answer, documented once here rather than on each
/// route (where a route documents the status itself, its own description stays): a JSON
/// body the `JsonConfig` of `lib.rs` cannot read (400 `invalid_json`) or one over its
/// limit (413), and an `Accept` header that rules JSON out (406, `accept_guard.rs`; the
/// downloads answer their file's own type and are not guarded).
struct SharedAnswers;

impl Modify for SharedAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let download = path.ends_with("/content")
                || path.ends_with("/thumbnail")
                || path.ends_with("/archive");
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                constrain_idempotency_key(operation);
                let takes_json = operation
                    .request_body
                    .as_ref()
                    .is_some_and(|body| body.content.contains_key("application/json"));
                if takes_json {
                    add_problem(
                        operation,
                        "400",
                        "invalid_json: the body is not the JSON this route takes",
                    );
                    add_problem(
                        operation,
                        "413",
                        "payload_too_large: the body is larger than 256 KiB",
                    );
                }
                if !download {
                    add_problem(
                        operation,
                        "406",
                        "not_acceptable: the Accept header rules out JSON",
                    );
                }
            }
        }
    }
}

/// The `Idempotency-Key` header's schema, once for every route that takes it: what
/// `actions::idempotency::checked_key` takes (1 to 255 visible ASCII characters).
fn constrain_idempotency_key(operation: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::Type;
    for parameter in operation.parameters.iter_mut().flatten() {
        if parameter.parameter_in == ParameterIn::Header
            && parameter.name == crate::idempotency::HEADER
        {
            parameter.schema = Some(
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(quire_shared::actions::idempotency::MAX_KEY_BYTES))
                    .pattern(Some("^[!-~]+$"))
                    .into(),
            );
        }
    }
}

fn add_problem(operation: &mut utoipa::openapi::path::Operation, status: &str, description: &str) {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    operation
        .responses
        .responses
        .entry(status.to_owned())
        .or_insert_with(|| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/problem+json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ProblemView")))
                        .build(),
                )
                .build()
                .into()
        });
}

/// `GET /api/openapi.json`.
pub async fn document() -> HttpResponse {
    HttpResponse::Ok().json(served_document())
}

/// The document as served. utoipa 5.5 writes a link's fields in snake case
/// (`operation_id`), which no tool reads as a link's `operationId`: they are renamed
/// here, the one place the document is written out.
pub fn served_document() -> serde_json::Value {
    let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    let operations = document
        .get_mut("paths")
        .and_then(serde_json::Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(serde_json::Value::as_object_mut)
        .flat_map(|item| item.values_mut());
    for operation in operations {
        let links = operation
            .get_mut("responses")
            .and_then(serde_json::Value::as_object_mut)
            .into_iter()
            .flat_map(|responses| responses.values_mut())
            .filter_map(|response| response.get_mut("links"))
            .filter_map(serde_json::Value::as_object_mut)
            .flat_map(|links| links.values_mut())
            .filter_map(serde_json::Value::as_object_mut);
        for link in links {
            for (from, to) in [
                ("operation_id", "operationId"),
                ("operation_ref", "operationRef"),
                ("request_body", "requestBody"),
            ] {
                if let Some(value) = link.remove(from) {
                    link.insert(to.to_owned(), value);
                }
            }
        }
    }
    document
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_settings_change_is_outside_the_document() {
        let document = served_document();
        let patch = &document["components"]["schemas"]["SettingsPatch"];
        assert_eq!(patch["minProperties"], 1, "{patch:#}");
        assert!(patch.get("maxProperties").is_none(), "{patch:#}");
    }
}
