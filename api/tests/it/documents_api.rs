//! The document routes beyond upload: listing, editing, bulk re-analysis, downloads and
//! the job catalogue.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};

async fn json_of(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    response.json().await.expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_pages_newest_first_with_a_stable_cursor_and_filters() {
    let app = TestApp::spawn().await;
    let mut uploaded = Vec::new();
    for index in 0..5 {
        uploaded.push(
            app.upload(format!("document number {index}").as_bytes())
                .await
                .0,
        );
    }
    let (_, token_b) = app.add_tenant("tenant-b").await;
    app.upload_as(&token_b, b"tenant b's own document".to_vec(), "b.txt")
        .await;

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/api/documents?limit=2&cursor={cursor}"),
            None => "/api/documents?limit=2".to_owned(),
        };
        let page = json_of(app.get_as(&app.token, &path).await, 200).await;
        for document in page["documents"].as_array().expect("array") {
            seen.push(uuid_at(document, "/id"));
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    uploaded.reverse();
    assert_eq!(
        seen, uploaded,
        "every document once, newest first, none of tenant b"
    );

    // The trash and the status filter.
    app.http
        .delete(format!("{}/api/documents/{}", app.address, uploaded[0]))
        .bearer_auth(&app.token)
        .send()
        .await
        .expect("trash");
    let live = json_of(app.get_as(&app.token, "/api/documents").await, 200).await;
    assert_eq!(live["documents"].as_array().map(Vec::len), Some(4));
    let trash = json_of(
        app.get_as(&app.token, "/api/documents?trashed=true").await,
        200,
    )
    .await;
    assert_eq!(trash["documents"][0]["id"], uploaded[0].to_string());
    let failed = json_of(
        app.get_as(&app.token, "/api/documents?status=failed").await,
        200,
    )
    .await;
    assert_eq!(failed["documents"].as_array().map(Vec::len), Some(0));

    for (query, code) in [
        ("status=BOGUS", "invalid_status"),
        ("limit=0", "invalid_limit"),
        ("limit=100000", "invalid_limit"),
        ("cursor=not-hex", "invalid_cursor"),
        ("limit=abc", "invalid_query"),
    ] {
        let problem = json_of(
            app.get_as(&app.token, &format!("/api/documents?{query}"))
                .await,
            400,
        )
        .await;
        assert_eq!(problem["code"], code, "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_title_analyzes_again_once_and_server_fields_are_ignored() {
    let app = TestApp::spawn().await;
    let (document_id, first_job) = app.upload(b"a letter to edit").await;
    let url = format!("{}/api/documents/{document_id}", app.address);
    let patch = |body: Value| {
        app.http
            .patch(&url)
            .bearer_auth(&app.token)
            .json(&body)
            .send()
    };

    // The upload's analysis is still queued (no worker runs): the edit returns it.
    let edited = json_of(
        patch(
            json!({ "title": "  Renamed letter ", "status": "READY", "tenant_id": Uuid::now_v7() }),
        )
        .await
        .expect("patch"),
        200,
    )
    .await;
    assert_eq!(edited["document"]["title"], "Renamed letter");
    assert_eq!(
        edited["document"]["status"], "PENDING",
        "status is server-owned"
    );
    assert_eq!(
        edited["job"]["id"],
        first_job.to_string(),
        "an active analysis is not duplicated"
    );

    let dated = json_of(
        patch(json!({ "issued_at": "2024-03-15" }))
            .await
            .expect("patch"),
        200,
    )
    .await;
    assert_eq!(dated["document"]["issued_at"], "2024-03-15");
    assert_eq!(
        dated["job"],
        Value::Null,
        "a date alone does not analyze again"
    );
    let cleared = json_of(
        patch(json!({ "issued_at": null })).await.expect("patch"),
        200,
    )
    .await;
    assert_eq!(cleared["document"]["issued_at"], Value::Null);

    for (body, code) in [
        (json!({ "title": "" }), "invalid_title"),
        (json!({ "title": "x".repeat(501) }), "invalid_title"),
        (json!({ "title": "invoice\u{202E}fdp" }), "invalid_title"),
        (json!({ "issued_at": "15.03.2024" }), "invalid_issued_at"),
    ] {
        let problem = json_of(patch(body).await.expect("patch"), 422).await;
        assert_eq!(problem["code"], code);
    }
    let not_json = app
        .http
        .patch(&url)
        .bearer_auth(&app.token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("patch");
    assert_eq!(json_of(not_json, 400).await["code"], "invalid_json");
    let huge = app
        .http
        .patch(&url)
        .bearer_auth(&app.token)
        .json(&json!({ "title": "x".repeat(1024 * 1024) }))
        .send()
        .await
        .expect("patch");
    assert_eq!(json_of(huge, 413).await["code"], "payload_too_large");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_reanalysis_returns_the_active_job_instead_of_a_duplicate() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"analyze me again").await;
    let (_, token_b) = app.add_tenant("tenant-b").await;
    let theirs = app
        .upload_as(&token_b, b"not yours".to_vec(), "b.txt")
        .await;
    let theirs: Value = theirs.json().await.expect("json");
    let their_id = uuid_at(&theirs, "/document/id");

    let response = app
        .http
        .post(format!("{}/api/documents/reanalyze", app.address))
        .bearer_auth(&app.token)
        .json(&json!({ "ids": [document_id, their_id], "force": true }))
        .send()
        .await
        .expect("reanalyze");
    let body = json_of(response, 202).await;
    assert_eq!(body["results"][0]["job"]["id"], job_id.to_string());
    assert_eq!(
        body["results"][1]["error"], "not_found",
        "another tenant's id is simply not found"
    );
    let jobs = json_of(
        app.get_as(
            &app.token,
            &format!("/api/documents/{document_id}/processing-jobs"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(jobs["jobs"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_downloads_as_an_attachment_that_is_never_sniffed() {
    let app = TestApp::spawn().await;
    let bytes = "Quittung über 12,00 €\n".as_bytes().to_vec();
    let response = app
        .upload_as(&app.token, bytes.clone(), "quittung \"März\".txt")
        .await;
    let created: Value = response.json().await.expect("json");
    let document_id = uuid_at(&created, "/document/id");

    let download = app
        .http
        .get(format!(
            "{}/api/documents/{document_id}/content",
            app.address
        ))
        .bearer_auth(&app.token)
        .header("accept", "*/*")
        .send()
        .await
        .expect("download");
    assert_eq!(download.status(), 200);
    let headers = download.headers().clone();
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let disposition = headers["content-disposition"].to_str().expect("ascii");
    assert!(
        disposition.starts_with("attachment; filename=\"quittung _M_rz_.txt\""),
        "{disposition}"
    );
    assert_eq!(download.bytes().await.expect("bytes").to_vec(), bytes);

    let thumbnail = app
        .get_as(
            &app.token,
            &format!("/api/documents/{document_id}/thumbnail"),
        )
        .await;
    assert_eq!(
        json_of(thumbnail, 409).await["code"],
        "thumbnail_not_available"
    );
    let (_, token_b) = app.add_tenant("tenant-b").await;
    let theirs = app
        .get_as(&token_b, &format!("/api/documents/{document_id}/content"))
        .await;
    assert_eq!(theirs.status(), 404);
}

/// The downloads answer their file's own type: a client that asks for that type (and not
/// JSON) is answered, never refused with 406 (the archive copy is a PDF like the others).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_answer_a_client_that_accepts_only_their_own_type() {
    let app = TestApp::spawn().await;
    let response = app
        .upload_as(&app.token, b"a receipt\n".to_vec(), "receipt.txt")
        .await;
    let created: Value = response.json().await.expect("json");
    let document_id = uuid_at(&created, "/document/id");
    for (download, accept, status) in [
        ("content", "text/plain", 200),
        ("thumbnail", "image/png", 409),
        // Not a scan: no archive copy, and the refusal is still problem+json.
        ("archive", "application/pdf", 404),
    ] {
        let response = app
            .http
            .get(format!(
                "{}/api/documents/{document_id}/{download}",
                app.address
            ))
            .bearer_auth(&app.token)
            .header("accept", accept)
            .send()
            .await
            .expect("download");
        assert_eq!(
            response.status(),
            status,
            "{download} with Accept: {accept}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_catalogue_lists_types_payloads_and_retired_types() {
    let app = TestApp::spawn().await;
    let catalogue = json_of(app.get_as(&app.token, "/api/jobs/catalogue").await, 200).await;
    let types: Vec<&str> = catalogue["job_types"]
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|entry| entry["type"].as_str())
        .collect();
    assert_eq!(
        types,
        [
            "analyze-document",
            "verify-document",
            "purge-document",
            "provision-tenant",
            "delete-tenant",
            "bench-noop",
            "deliver-webhook"
        ]
    );
    assert_eq!(
        catalogue["job_types"][0]["payload"]["document_version_id"],
        "uuid"
    );
    // The same definitions the worker enforces: tenant state, retry class, time limit.
    let delete = &catalogue["job_types"][4];
    assert_eq!(delete["required_tenant_status"], "deleting");
    assert_eq!(delete["retry"], "short_lived");
    assert!(delete["time_limit_seconds"].as_u64().is_some_and(|s| s > 0));
    assert_eq!(
        catalogue["job_types"][3]["required_tenant_status"],
        "creating"
    );
    assert_eq!(
        catalogue["retired_job_types"],
        json!(["generate-thumbnails", "generate-ocr-text"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_and_correspondents_are_set_listed_filtered_and_tenant_scoped() {
    let app = TestApp::spawn().await;
    let (tagged, _) = app.upload(b"a tax letter from acme").await;
    let (untagged, _) = app.upload(b"a note without labels").await;
    let url = format!("{}/api/documents/{tagged}", app.address);
    let edited = json_of(
        app.http
            .patch(&url)
            .bearer_auth(&app.token)
            .json(&json!({ "tags": [" tax ", "2024", "tax"], "correspondent": "ACME GmbH" }))
            .send()
            .await
            .expect("patch"),
        200,
    )
    .await;
    assert_eq!(edited["document"]["tags"], json!(["2024", "tax"]));
    assert_eq!(edited["document"]["correspondent"], "ACME GmbH");
    assert_eq!(
        edited["job"],
        Value::Null,
        "labels alone do not analyze again"
    );

    let by_tag = json_of(app.get_as(&app.token, "/api/documents?tag=tax").await, 200).await;
    assert_eq!(by_tag["documents"].as_array().map(Vec::len), Some(1));
    assert_eq!(by_tag["documents"][0]["id"], tagged.to_string());
    assert_eq!(by_tag["documents"][0]["tags"], json!(["2024", "tax"]));
    let by_correspondent = json_of(
        app.get_as(&app.token, "/api/documents?correspondent=ACME%20GmbH")
            .await,
        200,
    )
    .await;
    assert_eq!(by_correspondent["documents"][0]["id"], tagged.to_string());
    let plain = json_of(
        app.get_as(&app.token, &format!("/api/documents/{untagged}"))
            .await,
        200,
    )
    .await;
    assert_eq!(plain["tags"], json!([]));

    // Another tenant's tag of the same name is its own and sees none of ours.
    let (_, token_b) = app.add_tenant("tenant-b").await;
    let theirs = json_of(app.get_as(&token_b, "/api/documents?tag=tax").await, 200).await;
    assert_eq!(theirs["documents"].as_array().map(Vec::len), Some(0));

    let cleared = json_of(
        app.http
            .patch(&url)
            .bearer_auth(&app.token)
            .json(&json!({ "tags": [], "correspondent": null }))
            .send()
            .await
            .expect("patch"),
        200,
    )
    .await;
    assert_eq!(cleared["document"]["tags"], json!([]));
    assert_eq!(cleared["document"]["correspondent"], Value::Null);
    for (body, code) in [
        (json!({ "tags": [""] }), "invalid_tags"),
        (
            json!({ "tags": (0..51).map(|i| format!("t{i}")).collect::<Vec<_>>() }),
            "invalid_tags",
        ),
        (
            json!({ "correspondent": "c".repeat(201) }),
            "invalid_correspondent",
        ),
    ] {
        let problem = json_of(
            app.http
                .patch(&url)
                .bearer_auth(&app.token)
                .json(&body)
                .send()
                .await
                .expect("patch"),
            422,
        )
        .await;
        assert_eq!(problem["code"], code);
    }
}
