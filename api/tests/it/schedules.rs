//! The periodic jobs' last and next runs, as the job catalogue and the `/ops`
//! dashboard show them once a dispatcher ran a slot.

use quire_shared::test_support::{DEADLINE, TestContext, eventually};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::TestApp;

async fn schedules(app: &TestApp) -> Vec<Value> {
    let response = app.get_as(&app.token, "/api/jobs/catalogue").await;
    assert_eq!(response.status(), 200);
    let catalogue: Value = response.json().await.expect("json");
    catalogue["schedules"]
        .as_array()
        .expect("a schedules array")
        .clone()
}

fn named<'a>(schedules: &'a [Value], name: &str) -> &'a Value {
    schedules
        .iter()
        .find(|schedule| schedule["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {schedules:?}"))
}

fn time_of(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().expect("a timestamp"), &Rfc3339).expect("rfc3339")
}

/// The overview page of a dashboard session signed in with an operator token.
async fn dashboard(app: &TestApp) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let cookie = |response: &reqwest::Response, name: &str| {
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find(|value| value.starts_with(&format!("{name}=")))
            .and_then(|value| value.split(';').next())
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {name} cookie"))
    };
    let form = http
        .get(format!("{}/ops/login", app.address))
        .send()
        .await
        .expect("sign-in form");
    let login = cookie(&form, "ops_login");
    let html = form.text().await.expect("html");
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("csrf field")
        .to_owned();
    let signed_in = http
        .post(format!("{}/ops/login", app.address))
        .header("cookie", login)
        .form(&[("token", app.context.operator_token()), ("csrf", csrf)])
        .send()
        .await
        .expect("sign in");
    assert_eq!(signed_in.status(), 303);
    let session = cookie(&signed_in, "ops_session");
    http.get(format!("{}/ops", app.address))
        .header("cookie", session)
        .send()
        .await
        .expect("overview")
        .text()
        .await
        .expect("html")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalogue_and_the_dashboard_show_each_schedules_last_and_next_run() {
    let mut context = TestContext::new().await;
    context.settings.schedules.empty_trash.enabled = true;
    context.settings.schedules.empty_trash.every_seconds = 3600;
    let app = TestApp::spawn_in(context).await;

    let before = schedules(&app).await;
    let names: Vec<&str> = before
        .iter()
        .filter_map(|schedule| schedule["name"].as_str())
        .collect();
    assert_eq!(names, ["empty-trash", "integrity-scrub", "storage-gc"]);
    let trash = named(&before, "empty-trash");
    assert_eq!(trash["enabled"], true);
    assert_eq!(trash["every_seconds"], 3600);
    assert!(trash["last_run_at"].is_null(), "never ran: {trash}");
    assert!(trash["next_run_at"].is_null(), "{trash}");
    assert_eq!(named(&before, "integrity-scrub")["enabled"], false);

    app.start_dispatcher();
    let trash = eventually(DEADLINE, "the dispatcher ran the empty-trash slot", || {
        let app = &app;
        async move {
            let schedules = schedules(app).await;
            let trash = named(&schedules, "empty-trash").clone();
            (trash["last_outcome"] == "succeeded").then_some(trash)
        }
    })
    .await;
    assert_eq!(trash["runs"], 1);
    assert_eq!(
        trash["last_detail"],
        "0 purge jobs queued for 0 tenants; 0 documents skipped"
    );
    let (last, next) = (
        time_of(&trash["last_run_at"]),
        time_of(&trash["next_run_at"]),
    );
    assert_eq!(
        next - last,
        time::Duration::hours(1),
        "the next slot, an hour on"
    );
    assert!(time_of(&trash["last_finished_at"]) >= last);

    let page = dashboard(&app).await;
    let row = page
        .split("<tr id=\"schedule-empty-trash\">")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("no empty-trash row on the dashboard: {page}"));
    for shown in [
        trash["last_run_at"].as_str().expect("last run"),
        trash["next_run_at"].as_str().expect("next run"),
        "succeeded",
        "0 purge jobs queued",
    ] {
        assert!(row.contains(shown), "{shown} missing from the row: {row}");
    }
    let scrub = page
        .split("<tr id=\"schedule-integrity-scrub\">")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .expect("the scrub's row");
    assert!(
        scrub.contains("never") && scrub.contains("disabled"),
        "{scrub}"
    );
}
