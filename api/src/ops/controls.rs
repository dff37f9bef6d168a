//! `/ops/controls`: the dashboard's scheduling controls. Every queue with a pause or
//! resume button; every tenant with its limits (a form), its pause and a pause or
//! resume button. Each button calls the same action as the admin routes and
//! `quire-admin` (`actions::scheduling`) and answers with a notice. The overview shows
//! what is paused ([`paused_section`]).

use actix_web::{HttpRequest, HttpResponse, web};
use diesel_async::AsyncPgConnection;
use quire_shared::actions::{ActionError, scheduling};
use quire_shared::db::pauses::{self, QueuePause};
use quire_shared::db::tenants::{self, LimitsChange, Tenant};
use serde::Deserialize;
use uuid::Uuid;

use super::page::{document, escape};
use super::{ActionForm, authorized, html, see_other, session};
use crate::error::ApiError;
use crate::state::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/ops/controls", web::get().to(controls))
        .route("/ops/queues/{queue}/pause", web::post().to(pause_queue))
        .route("/ops/queues/{queue}/resume", web::post().to(resume_queue))
        .route(
            "/ops/tenants/{tenant_id}/pause",
            web::post().to(pause_tenant),
        )
        .route(
            "/ops/tenants/{tenant_id}/resume",
            web::post().to(resume_tenant),
        )
        .route("/ops/tenants/{tenant_id}/limits", web::post().to(limits));
}

/// A notice in the redirect's query: spaces as `+`, anything else not alphanumeric
/// percent-encoded.
fn notice(text: &str) -> String {
    let mut out = String::from("/ops/controls?notice=");
    for byte in text.bytes() {
        match byte {
            b' ' => out.push('+'),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => out.push(byte as char),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// The overview's "Paused" section: the paused queues and tenants, or nothing.
pub async fn paused_section(conn: &mut AsyncPgConnection) -> Result<String, ApiError> {
    let queues = pauses::paused_queues(conn).await?;
    let tenants = pauses::paused_tenant_count(conn).await?;
    if queues.is_empty() && tenants == 0 {
        return Ok(String::new());
    }
    let names: Vec<String> = queues.iter().map(|pause| escape(&pause.queue)).collect();
    Ok(format!(
        "<section id=\"paused\"><h2>Paused</h2><p>Queues: {}. Tenants: {tenants}. \
         Their queued jobs are held. <a href=\"/ops/controls\">Controls</a></p></section>",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    ))
}

#[derive(Deserialize)]
struct Notice {
    notice: Option<String>,
}

fn button(action: &str, id: &str, label: &str, csrf: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{action}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <button type=\"submit\" id=\"{id}\">{label}</button></form>",
        escape(csrf)
    )
}

fn queue_rows(paused: &[QueuePause], csrf: &str) -> String {
    let mut names: Vec<&str> = quire_shared::jobs::job_types().collect();
    names.sort_unstable();
    let mut rows = String::new();
    for queue in names {
        let pause = paused.iter().find(|pause| pause.queue == queue);
        let (state, control) = match pause {
            Some(pause) => (
                format!("paused {} by {}", pause.paused_at, escape(&pause.paused_by)),
                button(
                    &format!("/ops/queues/{queue}/resume"),
                    &format!("resume-queue-{queue}"),
                    "Resume",
                    csrf,
                ),
            ),
            None => (
                "running".to_owned(),
                button(
                    &format!("/ops/queues/{queue}/pause"),
                    &format!("pause-queue-{queue}"),
                    "Pause",
                    csrf,
                ),
            ),
        };
        rows.push_str(&format!(
            "<tr id=\"queue-{queue}\"><td>{queue}</td><td>{state}</td><td>{control}</td></tr>"
        ));
    }
    rows
}

fn tenant_rows(tenants: &[Tenant], csrf: &str) -> String {
    let limit = |value: Option<i32>| value.map_or("default".to_owned(), |value| value.to_string());
    let mut rows = String::new();
    for tenant in tenants {
        let id = tenant.id;
        let (state, control) = match tenant.processing_paused_at {
            Some(at) => (
                format!("paused {at}"),
                button(
                    &format!("/ops/tenants/{id}/resume"),
                    &format!("resume-tenant-{id}"),
                    "Resume",
                    csrf,
                ),
            ),
            None => (
                "processing".to_owned(),
                button(
                    &format!("/ops/tenants/{id}/pause"),
                    &format!("pause-tenant-{id}"),
                    "Pause",
                    csrf,
                ),
            ),
        };
        let field = |name: &str, value: String| {
            format!(
                "<input name=\"{name}\" size=\"7\" placeholder=\"{}\" aria-label=\"{name}\">",
                escape(&value)
            )
        };
        rows.push_str(&format!(
            "<tr id=\"tenant-{id}\"><td>{}</td><td>{}</td><td class=\"limits\">weight {} · running cap {} · \
             enqueue {}/s, burst {}</td><td>{state} {control}</td><td>\
             <form method=\"post\" action=\"/ops/tenants/{id}/limits\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">{}{}{}{}\
             <button type=\"submit\" id=\"limits-{id}\">Set</button></form></td></tr>",
            escape(&tenant.name),
            tenant.status,
            tenant.share_weight,
            limit(tenant.max_running_jobs),
            limit(tenant.enqueue_rate_per_second),
            limit(tenant.enqueue_burst),
            escape(csrf),
            field("share_weight", tenant.share_weight.to_string()),
            field("max_running_jobs", limit(tenant.max_running_jobs)),
            field("enqueue_rate_per_second", limit(tenant.enqueue_rate_per_second)),
            field("enqueue_burst", limit(tenant.enqueue_burst)),
        ));
    }
    if rows.is_empty() {
        rows.push_str("<tr><td colspan=\"5\">none</td></tr>");
    }
    rows
}

async fn controls(
    state: web::Data<AppState>,
    req: HttpRequest,
    query: web::Query<Notice>,
) -> Result<HttpResponse, ApiError> {
    let Some((secret, session)) = session::current(&state, &req).await? else {
        return Ok(see_other("/ops/login"));
    };
    let csrf = session::csrf_token(&state.settings.auth, &secret);
    let mut conn = state.connection().await?;
    let paused = pauses::paused_queues(&mut conn).await?;
    let tenants = tenants::list_tenants(&mut conn).await?;
    let notice = query
        .into_inner()
        .notice
        .map(|text| format!("<section id=\"notice\">{}</section>", escape(&text)))
        .unwrap_or_default();
    let body = format!(
        "<header><h1>Quire operations: controls</h1><div>{} <a href=\"/ops\" style=\"color:#fff\">Overview</a></div></header>\
         <main>{notice}\
         <section id=\"queues\"><h2>Queues</h2><p>A paused queue's queued jobs are held, not failed; running ones finish.</p>\
         <table><tr><th>queue</th><th>state</th><th></th></tr>{}</table></section>\
         <section id=\"tenants\"><h2>Tenants</h2><p>Limits: a number, or <code>default</code> for the \
         configuration's; an empty field stays as it is.</p>\
         <table><tr><th>tenant</th><th>status</th><th>limits</th><th>processing</th><th>set limits</th></tr>{}</table></section>\
         </main>",
        escape(&session.operator),
        queue_rows(&paused, &csrf),
        tenant_rows(&tenants, &csrf),
    );
    Ok(html(document("Quire operations: controls", &body, false)))
}

/// The answer to a button: the notice of a refusal the operator can act on, an error
/// otherwise.
fn answered<T>(
    done: Result<T, ActionError>,
    ok: &str,
    missing: &str,
) -> Result<HttpResponse, ApiError> {
    Ok(see_other(&match done {
        Ok(_) => notice(ok),
        Err(ActionError::NotFound) => notice(missing),
        Err(ActionError::Invalid { detail, .. }) => notice(&detail),
        Err(error) => return Err(error.into()),
    }))
}

async fn pause_queue(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, ApiError> {
    let operator = authorized(&state, &req, &form).await?.1.operator;
    let queue = path.into_inner();
    let mut conn = state.connection().await?;
    let done = scheduling::pause_queue(&mut conn, &queue, &operator).await;
    answered(done, &format!("queue {queue} paused"), "no such queue")
}

async fn resume_queue(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, ApiError> {
    let operator = authorized(&state, &req, &form).await?.1.operator;
    let queue = path.into_inner();
    let mut conn = state.connection().await?;
    let done = scheduling::resume_queue(&mut conn, &queue, &operator).await;
    answered(done, &format!("queue {queue} resumed"), "no such queue")
}

async fn pause_tenant(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<Uuid>,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, ApiError> {
    let operator = authorized(&state, &req, &form).await?.1.operator;
    let mut conn = state.connection().await?;
    let done = scheduling::pause_tenant(&mut conn, path.into_inner(), &operator).await;
    answered(done, "tenant paused", "no such tenant")
}

async fn resume_tenant(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<Uuid>,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, ApiError> {
    let operator = authorized(&state, &req, &form).await?.1.operator;
    let mut conn = state.connection().await?;
    let done = scheduling::resume_tenant(&mut conn, path.into_inner(), &operator).await;
    answered(done, "tenant resumed", "no such tenant")
}

#[derive(Deserialize)]
struct LimitsForm {
    csrf: String,
    #[serde(default)]
    share_weight: String,
    #[serde(default)]
    max_running_jobs: String,
    #[serde(default)]
    enqueue_rate_per_second: String,
    #[serde(default)]
    enqueue_burst: String,
}

/// A form field: empty leaves the limit as it is, `default` gives it back to the
/// configuration, anything else must be a number.
fn field(name: &str, text: &str) -> Result<Option<Option<i32>>, String> {
    match text.trim() {
        "" => Ok(None),
        "default" => Ok(Some(None)),
        number => number
            .parse()
            .map(|value| Some(Some(value)))
            .map_err(|_| format!("{name} is a number or default")),
    }
}

fn change(form: &LimitsForm) -> Result<LimitsChange, String> {
    let share_weight = match field("share_weight", &form.share_weight)? {
        Some(None) => return Err("share_weight has no default to go back to; name a number".into()),
        other => other.flatten(),
    };
    Ok(LimitsChange {
        share_weight,
        max_running_jobs: field("max_running_jobs", &form.max_running_jobs)?,
        enqueue_rate_per_second: field("enqueue_rate_per_second", &form.enqueue_rate_per_second)?,
        enqueue_burst: field("enqueue_burst", &form.enqueue_burst)?,
    })
}

async fn limits(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<Uuid>,
    form: web::Form<LimitsForm>,
) -> Result<HttpResponse, ApiError> {
    let check = ActionForm {
        csrf: form.csrf.clone(),
    };
    let operator = authorized(&state, &req, &check).await?.1.operator;
    let change = match change(&form) {
        Ok(change) => change,
        Err(why) => return Ok(see_other(&notice(&why))),
    };
    let mut conn = state.connection().await?;
    let done = scheduling::set_limits(&mut conn, path.into_inner(), change, &operator).await;
    answered(done, "tenant limits set", "no such tenant")
}
