//! Route table.

mod documents;
mod health;
mod jobs;
mod trash;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .service(
            web::scope("/api")
                .route("/documents", web::post().to(documents::upload))
                .route("/documents/{document_id}", web::get().to(documents::get))
                .route("/documents/{document_id}", web::delete().to(trash::trash))
                .route(
                    "/documents/{document_id}/restore",
                    web::post().to(trash::restore),
                )
                .route(
                    "/documents/{document_id}/processing-jobs",
                    web::get().to(jobs::list),
                )
                .route(
                    "/documents/{document_id}/processing-jobs/{job_id}",
                    web::get().to(jobs::get),
                )
                .route(
                    "/documents/{document_id}/processing-jobs/{job_id}/retry",
                    web::post().to(jobs::retry),
                ),
        );
}
