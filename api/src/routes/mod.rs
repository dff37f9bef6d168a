//! Route table. Every path is a resource whose other methods answer 405 problem+json.

mod catalogue;
mod content;
mod documents;
mod edit;
mod health;
mod jobs;
mod listing;
mod reanalyze;
mod trash;

use actix_web::{HttpResponse, Resource, web};

use crate::error::ApiError;

async fn method_not_allowed() -> Result<HttpResponse, ApiError> {
    Err(ApiError::MethodNotAllowed)
}

fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::readyz)))
        .service(
            web::scope("/api")
                .service(
                    resource("/documents")
                        .route(web::post().to(documents::upload))
                        .route(web::get().to(listing::list)),
                )
                // Before "/documents/{document_id}", which would take "reanalyze" as an id.
                .service(
                    resource("/documents/reanalyze").route(web::post().to(reanalyze::reanalyze)),
                )
                .service(
                    resource("/documents/{document_id}")
                        .route(web::get().to(documents::get))
                        .route(web::patch().to(edit::patch))
                        .route(web::delete().to(trash::trash)),
                )
                .service(
                    resource("/documents/{document_id}/content")
                        .route(web::get().to(content::content)),
                )
                .service(
                    resource("/documents/{document_id}/thumbnail")
                        .route(web::get().to(content::thumbnail)),
                )
                .service(resource("/jobs/catalogue").route(web::get().to(catalogue::catalogue)))
                .service(
                    resource("/documents/{document_id}/restore")
                        .route(web::post().to(trash::restore)),
                )
                .service(
                    resource("/documents/{document_id}/processing-jobs")
                        .route(web::get().to(jobs::list)),
                )
                .service(
                    resource("/documents/{document_id}/processing-jobs/{job_id}")
                        .route(web::get().to(jobs::get)),
                )
                .service(
                    resource("/documents/{document_id}/processing-jobs/{job_id}/retry")
                        .route(web::post().to(jobs::retry)),
                ),
        );
}
