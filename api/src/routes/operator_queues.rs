//! Queues (one per job type) for operators: which are paused, pause and resume. A
//! paused queue's queued jobs are held, not failed, and continue on resume. An unknown
//! queue answers 404.

use actix_web::{HttpResponse, web};
use quire_shared::actions::scheduling;
use quire_shared::db::pauses::{self, QueuePause};
use serde::Serialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::auth::Operator;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::ProblemView;

/// A queue as operators see it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct QueueView {
    /// The job type whose list this is.
    queue: String,
    paused: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    paused_at: Option<OffsetDateTime>,
    /// The operator who paused it.
    paused_by: Option<String>,
}

impl QueueView {
    fn new(queue: &str, pause: Option<&QueuePause>) -> Self {
        Self {
            queue: queue.to_owned(),
            paused: pause.is_some(),
            paused_at: pause.map(|pause| pause.paused_at),
            paused_by: pause.map(|pause| pause.paused_by.clone()),
        }
    }
}

#[utoipa::path(
    get, path = "/api/admin/queues", tag = "admin", operation_id = "list_queues",
    responses(
        (status = 200, description = "{queues: [...]}: every queue, paused or not, by name"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    _operator: Operator,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let paused = pauses::paused_queues(&mut conn).await?;
    let mut names: Vec<&str> = quire_shared::jobs::job_types().collect();
    names.sort_unstable();
    let queues: Vec<QueueView> = names
        .into_iter()
        .map(|queue| QueueView::new(queue, paused.iter().find(|pause| pause.queue == queue)))
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "queues": queues })))
}

#[utoipa::path(
    post, path = "/api/admin/queues/{queue}/pause", tag = "admin", operation_id = "pause_queue",
    params(("queue" = String, Path, description = "the job type, e.g. analyze-document")),
    responses(
        (status = 200, description = "paused (or paused already): its queued jobs are held, running ones finish", body = QueueView),
        (status = 404, description = "no such queue", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn pause(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let queue = path.into_inner();
    let mut conn = state.connection().await?;
    let pause = scheduling::pause_queue(&mut conn, &queue, &operator.name).await?;
    Ok(HttpResponse::Ok().json(QueueView::new(&queue, Some(&pause))))
}

#[utoipa::path(
    post, path = "/api/admin/queues/{queue}/resume", tag = "admin", operation_id = "resume_queue",
    params(("queue" = String, Path, description = "the job type, e.g. analyze-document")),
    responses(
        (status = 200, description = "{queue, reannounced}: running again (or never paused); its held jobs continue"),
        (status = 404, description = "no such queue", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn resume(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let queue = path.into_inner();
    let mut conn = state.connection().await?;
    let resumed = scheduling::resume_queue(&mut conn, &queue, &operator.name).await?;
    Ok(HttpResponse::Ok().json(json!({
        "queue": QueueView::new(&queue, None),
        "reannounced": resumed.reannounced,
    })))
}
