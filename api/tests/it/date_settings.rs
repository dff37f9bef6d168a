//! A tenant's date settings (issue 18, item 4): they reach the analysis (two tenants date
//! the same ambiguous text differently, and read month names only in their languages),
//! members read them, owners change them through `/api/settings`, operators through
//! `quire-admin tenant dates`, and what is wrong is refused clearly.

use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};
use quire_shared::states::JobStatus;

async fn settings(app: &TestApp, token: &str, body: Option<Value>) -> (u16, Value) {
    let method = if body.is_some() {
        Method::PATCH
    } else {
        Method::GET
    };
    app.json_as(method, token, "/api/settings", body).await
}

async fn upload(app: &TestApp, token: &str, text: &str) -> (Uuid, Uuid) {
    let response = app
        .upload_as(token, text.as_bytes().to_vec(), "letter.txt")
        .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    (uuid_at(&body, "/document/id"), uuid_at(&body, "/job/id"))
}

async fn issued_at(app: &TestApp, token: &str, document_id: Uuid) -> Value {
    let (status, body) = app
        .json_as(
            Method::GET,
            token,
            &format!("/api/documents/{document_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["issued_at"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dmy_and_an_mdy_tenant_date_the_same_ambiguous_text_differently() {
    let app = TestApp::spawn().await;
    let (_, us_token) = app.add_tenant("tenant-us").await;
    let (status, body) = settings(
        &app,
        &app.token,
        Some(json!({ "date_order": "dmy", "date_languages": ["it", "de"] })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = settings(
        &app,
        &us_token,
        Some(json!({ "date_order": "mdy", "date_languages": ["en"] })),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let invoice = "ACME Corp\nInvoice 4411\nInvoice date: 03/04/2024\nTotal 1,204.50\n";
    let letter = "Comune di Roma\nRoma, lì 5 febbraio 2024\nEgregio Signore,\n";
    let (eu_invoice, eu_invoice_job) = upload(&app, &app.token, invoice).await;
    let (us_invoice, us_invoice_job) = upload(&app, &us_token, invoice).await;
    let (eu_letter, eu_letter_job) = upload(&app, &app.token, letter).await;
    let (us_letter, us_letter_job) = upload(&app, &us_token, letter).await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    for job in [eu_invoice_job, us_invoice_job, eu_letter_job, us_letter_job] {
        app.wait_for_job(job, JobStatus::Succeeded).await;
    }

    assert_eq!(issued_at(&app, &app.token, eu_invoice).await, "2024-04-03");
    assert_eq!(issued_at(&app, &us_token, us_invoice).await, "2024-03-04");
    // Italian is the first tenant's language, not the second's.
    assert_eq!(issued_at(&app, &app.token, eu_letter).await, "2024-02-05");
    assert_eq!(issued_at(&app, &us_token, us_letter).await, Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_read_the_settings_owners_change_them_and_what_is_wrong_is_refused_clearly() {
    let app = TestApp::spawn().await;
    let (status, body) = settings(&app, &app.token, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "date_languages": null,
            "date_order": null,
            "effective": {
                "date_languages": ["en", "de", "fr", "es", "it", "nl", "pt"],
                "date_order": "dmy",
            },
        })
    );

    // Any member reads them; only members:manage changes them.
    let reader = Uuid::now_v7();
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/members",
            Some(json!({ "user_id": reader, "capability_set": "readonly" })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let reader = app.context.token_for(app.tenant_id, reader);
    assert_eq!(settings(&app, &reader, None).await.0, 200);
    let (status, body) = settings(&app, &reader, Some(json!({ "date_order": "mdy" }))).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("permission_denied")),
        "{body}"
    );

    let refused = [
        (json!({}), 422, "invalid_settings", "name date_languages"),
        (
            json!({ "date_order": "dym" }),
            422,
            "invalid_settings",
            "date_order is one of dmy, mdy, ymd; \"dym\" is not",
        ),
        (
            json!({ "date_languages": ["en", "klingon"] }),
            422,
            "invalid_settings",
            "\"klingon\" is not one of en, de, fr, es, it, nl, pt",
        ),
        (
            json!({ "date_languages": [] }),
            422,
            "invalid_settings",
            "1 to 7",
        ),
        (json!({ "date_order": 3 }), 400, "invalid_json", ""),
        (json!({ "date_format": "dmy" }), 400, "invalid_json", ""),
    ];
    for (body, status, code, detail) in refused {
        let (answered, problem) = settings(&app, &app.token, Some(body.clone())).await;
        assert_eq!(
            (answered, problem["code"].as_str()),
            (status, Some(code)),
            "{body}: {problem}"
        );
        let said = problem["detail"].as_str().unwrap_or_default();
        assert!(said.contains(detail), "{body}: {said}");
    }
    // Nothing refused changed anything.
    assert_eq!(
        settings(&app, &app.token, None).await.1["date_order"],
        Value::Null
    );

    let (status, body) = settings(
        &app,
        &app.token,
        Some(json!({ "date_languages": ["PT", "de", "pt"], "date_order": "YMD" })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["date_languages"], json!(["de", "pt"]));
    assert_eq!(body["date_order"], "ymd");
    assert_eq!(
        body["effective"],
        json!({ "date_languages": ["de", "pt"], "date_order": "ymd" })
    );
    // One named, the other unchanged; null gives it back to the default.
    let (status, body) = settings(&app, &app.token, Some(json!({ "date_languages": null }))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["date_languages"], Value::Null);
    assert_eq!(body["date_order"], "ymd");
    assert_eq!(
        body["effective"]["date_languages"].as_array().map(Vec::len),
        Some(7)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quire_admin_shows_and_sets_a_tenants_date_settings() {
    let app = TestApp::spawn().await;
    let (ok, out, err) = app.admin_cli(&["tenant", "dates", "--tenant", "tenant-a"]);
    assert!(ok, "{err}");
    assert!(
        out.ends_with(
            "date_languages=default\tdate_order=default\teffective=en,de,fr,es,it,nl,pt/dmy"
        ),
        "{out}"
    );
    let (ok, out, err) = app.admin_cli(&[
        "tenant",
        "dates",
        "--tenant",
        "tenant-a",
        "--languages",
        "nl,en",
        "--order",
        "mdy",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.ends_with("date_languages=en,nl\tdate_order=mdy\teffective=en,nl/mdy"),
        "{out}"
    );
    let (_, body) = settings(&app, &app.token, None).await;
    assert_eq!(body["date_languages"], json!(["en", "nl"]));
    assert_eq!(body["date_order"], "mdy");

    let (ok, _, err) =
        app.admin_cli(&["tenant", "dates", "--tenant", "tenant-a", "--order", "dym"]);
    assert!(!ok);
    assert!(err.contains("date_order is one of dmy, mdy, ymd"), "{err}");
    let (ok, out, err) = app.admin_cli(&[
        "tenant", "dates", "--tenant", "tenant-a", "--order", "default",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("date_languages=en,nl\tdate_order=default\teffective=en,nl/dmy"),
        "{out}"
    );
}
