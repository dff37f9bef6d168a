//! The dashboard's HTML, rendered on the server: no script, nothing from elsewhere, every
//! value escaped. The page refreshes itself every ten seconds.

use quire_shared::db::jobs::Job;
use quire_shared::db::stats::{Ages, MinuteCount, QueueRow};
use quire_shared::db::workers::WorkerRow;
use quire_shared::schedules::ScheduleView;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}\
header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;justify-content:space-between;align-items:center}\
main{padding:16px 24px;display:grid;gap:16px}section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 16px}\
h1{font-size:18px;margin:0}h2{font-size:15px;margin:0 0 8px}table{border-collapse:collapse;width:100%}\
td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #eef0f4;font-variant-numeric:tabular-nums}\
.cards{display:flex;gap:16px}.card{flex:1}.big{font-size:24px;font-weight:600}\
.failed{color:#b42318}.ok{color:#067647}button{cursor:pointer}form{display:inline}\
.login{max-width:420px;margin:80px auto}input[type=password]{width:100%;padding:6px;margin:8px 0}";

pub(super) fn document(title: &str, body: &str, refresh: bool) -> String {
    let refresh = if refresh {
        "<meta http-equiv=\"refresh\" content=\"10\">"
    } else {
        ""
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}\
         <title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>",
        escape(title)
    )
}

pub fn login(csrf: &str, error: Option<&str>) -> String {
    let error = error
        .map(|text| format!("<p class=\"failed\">{}</p>", escape(text)))
        .unwrap_or_default();
    document(
        "Quire operations: sign in",
        &format!(
            "<section class=\"login\"><h1>Quire operations</h1>{error}\
             <form method=\"post\" action=\"/ops/login\">\
             <label for=\"token\">Operator token (quire-admin admin-token)</label>\
             <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\" required>\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\" id=\"sign-in\">Sign in</button></form></section>",
            escape(csrf)
        ),
        false,
    )
}

/// Everything the overview shows.
pub struct Overview {
    pub operator: String,
    pub csrf: String,
    pub ages: Ages,
    /// `PENDING` events and whether the figure is an estimate (`ActiveEvents::pending`).
    pub pending_events: (i64, bool),
    pub queues: Vec<QueueRow>,
    pub list_lengths: Vec<(String, i64)>,
    pub per_minute: Vec<MinuteCount>,
    pub workers: Vec<WorkerRow>,
    pub schedules: Vec<ScheduleView>,
    pub failed: Vec<Job>,
    pub active: Vec<Job>,
    pub finished: Vec<Job>,
    pub notice: Option<String>,
    /// The "Paused" section (`controls::paused_section`), or nothing.
    pub paused: String,
}

fn chart(per_minute: &[MinuteCount]) -> String {
    let mut succeeded = [0i64; 60];
    let mut failed = [0i64; 60];
    for row in per_minute {
        let Ok(index) = usize::try_from(row.minutes_ago) else {
            continue;
        };
        if index >= 60 {
            continue;
        }
        match row.status.as_str() {
            "SUCCEEDED" => succeeded[59 - index] += row.count,
            "FAILED" | "CANCELLED" => failed[59 - index] += row.count,
            _ => {}
        }
    }
    let peak = succeeded
        .iter()
        .zip(failed.iter())
        .map(|(s, f)| s + f)
        .max()
        .unwrap_or(0)
        .max(1);
    let (width, height, bar) = (600.0, 120.0, 10.0);
    let mut bars = String::new();
    for minute in 0..60 {
        let x = minute as f64 * bar;
        let ok = succeeded[minute] as f64 / peak as f64 * height;
        let bad = failed[minute] as f64 / peak as f64 * height;
        bars.push_str(&format!(
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"8\" height=\"{ok:.1}\" fill=\"#12b76a\"/>\
             <rect x=\"{x}\" y=\"{:.1}\" width=\"8\" height=\"{bad:.1}\" fill=\"#f04438\"/>",
            height - ok,
            height - ok - bad
        ));
    }
    format!(
        "<svg viewBox=\"0 0 {width} {height}\" width=\"100%\" height=\"140\" role=\"img\" \
         aria-label=\"jobs finished per minute, last hour\">{bars}</svg>\
         <p>Finished per minute over the last hour (peak {peak}): green succeeded, red failed or cancelled.</p>"
    )
}

fn job_rows(jobs: &[Job], csrf: &str, action: Option<&str>) -> String {
    let mut rows = String::new();
    for job in jobs {
        let button = action
            .map(|action| {
                format!(
                    "<form method=\"post\" action=\"/ops/jobs/{}/{action}\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                     <button type=\"submit\" id=\"{action}-{}\">{}</button></form>",
                    job.id,
                    escape(csrf),
                    job.id,
                    if action == "retry" { "Retry" } else { "Cancel" }
                )
            })
            .unwrap_or_default();
        let class = match job.status.as_str() {
            "FAILED" | "CANCELLED" => "failed",
            "SUCCEEDED" => "ok",
            _ => "",
        };
        rows.push_str(&format!(
            "<tr id=\"job-{}\"><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}/{}</td>\
             <td>{}</td><td>{}</td><td>{button}</td></tr>",
            job.id,
            job.id,
            escape(&job.job_type),
            job.status,
            job.attempts,
            job.max_attempts,
            escape(job.error_code.as_deref().unwrap_or("")),
            escape(job.error_message.as_deref().unwrap_or("")),
        ));
    }
    if rows.is_empty() {
        rows.push_str("<tr><td colspan=\"7\">none</td></tr>");
    }
    format!(
        "<table><tr><th>job</th><th>type</th><th>status</th><th>attempts</th><th>error</th>\
         <th>message</th><th></th></tr>{rows}</table>"
    )
}

fn when(at: Option<OffsetDateTime>, otherwise: &str) -> String {
    at.and_then(|at| at.format(&Rfc3339).ok())
        .unwrap_or_else(|| otherwise.to_owned())
}

/// The periodic jobs: last run, its outcome and what it did, next run.
fn schedule_rows(schedules: &[ScheduleView]) -> String {
    let mut rows = String::new();
    for schedule in schedules {
        let outcome = schedule.last_outcome.as_deref().unwrap_or("");
        let class = match outcome {
            "failed" => "failed",
            "succeeded" => "ok",
            _ => "",
        };
        let next = if schedule.enabled {
            when(schedule.next_run_at, "at the next check")
        } else {
            "disabled".to_owned()
        };
        rows.push_str(&format!(
            "<tr id=\"schedule-{name}\"><td>{name}</td><td>{}</td><td>{}</td>\
             <td class=\"{class}\">{}</td><td>{}</td><td>{}</td></tr>",
            schedule.every_seconds,
            escape(&when(schedule.last_run_at, "never")),
            escape(outcome),
            escape(schedule.last_detail.as_deref().unwrap_or("")),
            escape(&next),
            name = escape(schedule.name),
        ));
    }
    format!(
        "<table><tr><th>schedule</th><th>every (s)</th><th>last run</th><th>outcome</th>\
         <th>what it did</th><th>next run</th></tr>{rows}</table>"
    )
}

pub fn overview(view: &Overview) -> String {
    let live_slots: i32 = view.workers.iter().map(|worker| worker.slots).sum();
    let busy_slots: i32 = view.workers.iter().map(|worker| worker.busy).sum();
    let pending = match view.pending_events {
        (count, false) => count.to_string(),
        (count, true) => format!("about {count}"),
    };
    let notice = view
        .notice
        .as_deref()
        .map(|text| format!("<section id=\"notice\">{}</section>", escape(text)))
        .unwrap_or_default();
    let mut queues = String::new();
    for row in &view.queues {
        let length = view
            .list_lengths
            .iter()
            .find(|(queue, _)| *queue == row.job_type)
            .map_or("?".to_owned(), |(_, length)| length.to_string());
        queues.push_str(&format!(
            "<tr><td>{}</td><td>{length}</td><td>{}</td><td>{}</td><td class=\"ok\">{}</td><td class=\"failed\">{}</td></tr>",
            escape(&row.job_type),
            row.queued,
            row.running,
            row.succeeded_last_hour,
            row.failed_last_hour
        ));
    }
    let mut workers = String::new();
    for worker in &view.workers {
        workers.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&worker.id),
            escape(&worker.host),
            worker.busy,
            worker.slots,
            worker.analysis_slots_label(),
            escape(&worker.queues.join(", ")),
            worker.last_seen_at
        ));
    }
    let body = format!(
        "<header><h1>Quire operations</h1><div>{} \
         <form method=\"post\" action=\"/ops/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <button type=\"submit\">Sign out</button></form> <a href=\"/ops/controls\" style=\"color:#fff\">Controls</a></div></header><main>{notice}{}\
         <div class=\"cards\">\
         <section class=\"card\"><h2>Outbox lag</h2><div class=\"big\" id=\"outbox-lag\">{:.1} s</div>{pending} pending events</section>\
         <section class=\"card\"><h2>Oldest queued job</h2><div class=\"big\">{:.1} s</div></section>\
         <section class=\"card\"><h2>Live workers</h2><div class=\"big\" id=\"workers\">{}</div>{busy_slots}/{live_slots} slots busy</section>\
         </div>\
         <section><h2>Jobs finished, last hour</h2>{}</section>\
         <section><h2>Queues</h2><table><tr><th>type</th><th>Redis list</th><th>queued</th><th>running</th>\
         <th>succeeded (1 h)</th><th>failed (1 h)</th></tr>{queues}</table></section>\
         <section id=\"schedules\"><h2>Schedules</h2>{}</section>\
         <section id=\"failed\"><h2>Failed jobs</h2>{}</section>\
         <section id=\"active\"><h2>Queued and running (oldest first)</h2>{}</section>\
         <section id=\"finished\"><h2>Recently finished</h2>{}</section>\
         <section><h2>Workers</h2><table><tr><th>worker</th><th>host</th><th>busy/slots</th><th>analysis slots</th><th>queues</th><th>last seen</th></tr>{workers}</table></section>\
         </main>",
        escape(&view.operator),
        escape(&view.csrf),
        view.paused,
        view.ages.outbox_lag_seconds,
        view.ages.oldest_queued_seconds,
        view.workers.len(),
        chart(&view.per_minute),
        schedule_rows(&view.schedules),
        job_rows(&view.failed, &view.csrf, Some("retry")),
        job_rows(&view.active, &view.csrf, Some("cancel")),
        job_rows(&view.finished, &view.csrf, None),
    );
    document("Quire operations", &body, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_escaped() {
        assert_eq!(
            escape("<script>\"x\"&'y'"),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;"
        );
    }
}
