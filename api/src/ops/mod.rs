//! `/ops`: the operator dashboard. Server-rendered HTML without script: queue depths and
//! throughput, jobs finished per minute over the last hour, outbox lag, live workers
//! and their slots, the periodic jobs' last and next runs, failed jobs with their safe error and a retry button, queued and
//! running jobs with a cancel button. Sign-in takes an operator token and opens a
//! server-side session; see `session`.

mod controls;
mod page;
mod session;

use actix_web::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, LOCATION};
use actix_web::{HttpRequest, HttpResponse, web};
use quire_shared::actions::ActionError;
use quire_shared::actions::jobs::{self as job_actions, CANCELLED_BY_OPERATOR, JobScope};
use quire_shared::actions::ops_sessions;
use quire_shared::db::jobs::{self, JobFilter};
use quire_shared::db::ops_sessions::SessionRow;
use quire_shared::db::{stats, workers};
use quire_shared::states::JobStatus;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
                      frame-ancestors 'none'; base-uri 'none'";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/ops", web::get().to(overview))
        .route("/ops/login", web::get().to(login_form))
        .route("/ops/login", web::post().to(login))
        .route("/ops/logout", web::post().to(logout))
        .route("/ops/jobs/{job_id}/retry", web::post().to(retry))
        .route("/ops/jobs/{job_id}/cancel", web::post().to(cancel))
        .configure(controls::configure);
}

fn html(body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((CONTENT_SECURITY_POLICY, POLICY))
        .insert_header((CACHE_CONTROL, "no-store"))
        .insert_header(("X-Frame-Options", "DENY"))
        .body(body)
}

fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((LOCATION, to.to_owned()))
        .finish()
}

#[derive(Deserialize)]
struct Notice {
    notice: Option<String>,
}

async fn overview(
    state: web::Data<AppState>,
    req: HttpRequest,
    query: web::Query<Notice>,
) -> Result<HttpResponse, ApiError> {
    let Some((secret, session)) = session::current(&state, &req).await? else {
        return Ok(see_other("/ops/login"));
    };
    let mut conn = state.connection().await?;
    let list = |statuses: Vec<JobStatus>, oldest_first: bool| JobFilter {
        statuses,
        oldest_first,
        job_type: None,
        tenant_id: None,
        limit: 20,
    };
    let types: Vec<&str> = quire_shared::jobs::job_types().collect();
    let queues = stats::queues(&mut conn).await?;
    // Bounded reads only (`stats::active_events`): counting every retained event, or
    // every event of a long backlog, would meet the API's statement timeout on a large
    // database.
    let events = stats::active_events(&mut conn).await?;
    let pending_events = events.pending(queues.iter().map(|row| row.queued).sum());
    let view = page::Overview {
        csrf: session::csrf_token(&state.settings.auth, &secret),
        operator: session.operator,
        ages: stats::ages(&mut conn, &events).await?,
        pending_events,
        queues,
        list_lengths: quire_shared::broker::queue_lengths(
            &state.redis,
            &state.settings.redis.namespace,
            &types,
        )
        .await
        .unwrap_or_default(),
        per_minute: stats::finished_per_minute(&mut conn).await?,
        workers: workers::live(&mut conn).await?,
        schedules: quire_shared::schedules::overview(&mut conn, &state.settings.schedules).await?,
        failed: jobs::list_jobs(&mut conn, &list(vec![JobStatus::Failed], false)).await?,
        active: jobs::list_jobs(
            &mut conn,
            &list(vec![JobStatus::Queued, JobStatus::Running], true),
        )
        .await?,
        finished: jobs::list_jobs(
            &mut conn,
            &list(
                vec![
                    JobStatus::Succeeded,
                    JobStatus::Failed,
                    JobStatus::Cancelled,
                ],
                false,
            ),
        )
        .await?,
        notice: query.into_inner().notice,
        paused: controls::paused_section(&mut conn).await?,
    };
    Ok(html(page::overview(&view)))
}

async fn login_form(state: web::Data<AppState>) -> HttpResponse {
    let cookie = session::login_cookie(&state.settings.ops);
    let csrf = session::csrf_token(&state.settings.auth, cookie.value());
    let mut response = html(page::login(&csrf, None));
    let _ = response.add_cookie(&cookie);
    response
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    csrf: String,
}

/// Opens a session with an operator token. Nothing else opens one: a session's own
/// secret is not a token, so a session cannot renew itself.
async fn login(
    state: web::Data<AppState>,
    req: HttpRequest,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, ApiError> {
    let auth = &state.settings.auth;
    let ops = &state.settings.ops;
    let pre_session = req
        .cookie(session::LOGIN_COOKIE)
        .map(|cookie| cookie.value().to_owned())
        .unwrap_or_default();
    if pre_session.is_empty() || !session::csrf_matches(auth, &pre_session, &form.csrf) {
        return Err(ApiError::forbidden(
            "csrf_failed",
            "the sign-in form expired: load it again",
        ));
    }
    let mut conn = state.connection().await?;
    let opened = match ops_sessions::open(&mut conn, auth, ops, form.token.trim()).await {
        Ok(opened) => opened,
        Err(ActionError::Invalid { code, .. }) => {
            let why = if code == "operator_token_expired" {
                "That operator token has expired."
            } else {
                "That is not a valid operator token."
            };
            let csrf = session::csrf_token(auth, &pre_session);
            let mut response = html(page::login(&csrf, Some(why)));
            *response.status_mut() = actix_web::http::StatusCode::UNAUTHORIZED;
            return Ok(response);
        }
        Err(error) => return Err(error.into()),
    };
    // A session this browser had before ends now rather than at its expiry.
    if let Some(previous) = session::secret(&req) {
        ops_sessions::close(&mut conn, &previous).await?;
    }
    tracing::info!(
        operator = %opened.session.operator,
        session_id = %opened.session.id,
        token_id = opened.session.token_id.as_deref().unwrap_or("-"),
        expires_at = %opened.session.expires_at,
        "operator signed in to the dashboard"
    );
    let mut response = see_other("/ops");
    let _ = response.add_cookie(&session::session_cookie(ops, &opened));
    let _ = response.add_cookie(&session::cleared(ops, session::LOGIN_COOKIE));
    Ok(response)
}

#[derive(Deserialize)]
struct ActionForm {
    csrf: String,
}

/// The session of a state-changing request, with its CSRF token checked: its secret
/// and row.
async fn authorized(
    state: &AppState,
    req: &HttpRequest,
    form: &ActionForm,
) -> Result<(String, SessionRow), ApiError> {
    let (secret, session) = session::current(state, req)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    if !session::csrf_matches(&state.settings.auth, &secret, &form.csrf) {
        return Err(ApiError::forbidden(
            "csrf_failed",
            "the form expired: reload the page",
        ));
    }
    Ok((secret, session))
}

/// Ends the session on the server (its cookie opens nothing afterwards) and clears it.
async fn logout(
    state: web::Data<AppState>,
    req: HttpRequest,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, ApiError> {
    let (secret, session) = authorized(&state, &req, &form).await?;
    let mut conn = state.connection().await?;
    ops_sessions::close(&mut conn, &secret).await?;
    tracing::info!(operator = %session.operator, session_id = %session.id, "operator signed out");
    let mut response = see_other("/ops/login");
    let _ = response.add_cookie(&session::cleared(
        &state.settings.ops,
        session::SESSION_COOKIE,
    ));
    Ok(response)
}

async fn retry(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<Uuid>,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, ApiError> {
    let operator = authorized(&state, &req, &form).await?.1.operator;
    let job_id = path.into_inner();
    let mut conn = state.connection().await?;
    let retried = job_actions::retry(
        &mut conn,
        JobScope::Any,
        job_id,
        state.settings.jobs.max_attempts,
    )
    .await;
    tracing::info!(%operator, %job_id, retried = retried.is_ok(), "operator retried a job");
    Ok(see_other(match retried {
        Ok(_) => "/ops?notice=job+queued+again",
        Err(ActionError::NotFound) => "/ops?notice=no+such+job",
        Err(ActionError::Conflict {
            code: "job_already_active",
            ..
        }) => "/ops?notice=another+job+for+this+document+is+active",
        Err(ActionError::Conflict { .. }) => "/ops?notice=the+job+is+not+FAILED+any+more",
        Err(error) => return Err(error.into()),
    }))
}

async fn cancel(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<Uuid>,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, ApiError> {
    let operator = authorized(&state, &req, &form).await?.1.operator;
    let job_id = path.into_inner();
    let mut conn = state.connection().await?;
    let cancelled =
        job_actions::cancel(&mut conn, JobScope::Any, job_id, CANCELLED_BY_OPERATOR).await;
    tracing::info!(%operator, %job_id, cancelled = cancelled.is_ok(), "operator cancelled a job");
    Ok(see_other(match cancelled {
        Ok(_) => "/ops?notice=job+cancelled",
        Err(ActionError::NotFound) => "/ops?notice=no+such+job",
        Err(ActionError::Conflict { .. }) => "/ops?notice=the+job+had+finished+already",
        Err(error) => return Err(error.into()),
    }))
}
