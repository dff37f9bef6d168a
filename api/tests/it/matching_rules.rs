//! Matching rules against the real stack: a text document uploaded, analyzed by a real
//! worker, labelled by the tenant's rules; a user's choice survives every re-analysis; an
//! edited rule applies at the next analysis; hostile rules are refused before they are
//! stored; the rule allowance holds under concurrent requests.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};
use quire_shared::states::JobStatus;

const INVOICE: &[u8] = b"ACME Supplies GmbH\nRechnung Nr. 4711\nRechnungsdatum: 15.03.2024\n\
Sehr geehrte Frau Mueller, wir berechnen Ihnen die Lieferung.\n";

/// Creates a tag or correspondent (`kind` is the route: `tags`, `correspondents`) and
/// answers its id.
async fn create(app: &TestApp, kind: &str, name: &str, rule: Value) -> Uuid {
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            &format!("/api/{kind}"),
            Some(json!({ "name": name, "rule": rule })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    uuid_at(&body, "/id")
}

async fn document(app: &TestApp, id: Uuid) -> Value {
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/{id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The document's tags as (name, automatic), by name.
async fn tags_of(app: &TestApp, id: Uuid) -> Vec<(String, bool)> {
    let body = document(app, id).await;
    let tags = body["labels"]["tags"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = body["tags"]
        .as_array()
        .map(|tags| tags.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let labelled: Vec<(String, bool)> = tags
        .iter()
        .map(|tag| {
            (
                tag["name"].as_str().unwrap_or_default().to_owned(),
                tag["automatic"].as_bool().expect("automatic flag"),
            )
        })
        .collect();
    assert_eq!(
        names,
        labelled
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        "tags and labels.tags name the same tags"
    );
    labelled
}

/// The document's correspondent as (name, automatic).
async fn correspondent_of(app: &TestApp, id: Uuid) -> Option<(String, bool)> {
    let body = document(app, id).await;
    let correspondent = &body["labels"]["correspondent"];
    if correspondent.is_null() {
        assert!(body["correspondent"].is_null(), "{body}");
        return None;
    }
    assert_eq!(body["correspondent"], correspondent["name"], "{body}");
    Some((
        correspondent["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        correspondent["automatic"]
            .as_bool()
            .expect("automatic flag"),
    ))
}

/// Analyzes the document again and waits for the analysis to succeed.
async fn reanalyze(app: &TestApp, id: Uuid) {
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/documents/reanalyze",
            Some(json!({ "ids": [id] })),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let job = uuid_at(&body, "/results/0/job/id");
    app.wait_for_job(job, JobStatus::Succeeded).await;
}

async fn patch_document(app: &TestApp, id: Uuid, patch: Value) {
    let (status, body) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/documents/{id}"),
            Some(patch),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

fn owned(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
    pairs
        .iter()
        .map(|(name, automatic)| ((*name).to_owned(), *automatic))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_label_an_uploaded_text_and_the_labels_are_searchable() {
    let app = TestApp::spawn().await;
    create(
        &app,
        "tags",
        "finance",
        json!({"algorithm": "any", "text": "invoice rechnung"}),
    )
    .await;
    create(
        &app,
        "tags",
        "letters",
        json!({"algorithm": "exact", "text": "sehr geehrte frau"}),
    )
    .await;
    create(
        &app,
        "tags",
        "numbered",
        json!({"algorithm": "regex", "text": r"Nr\. \d{4}\b"}),
    )
    .await;
    create(
        &app,
        "tags",
        "never",
        json!({"algorithm": "all", "text": "rechnung mahnung"}),
    )
    .await;
    create(
        &app,
        "tags",
        "manual",
        json!({"algorithm": "none", "text": "rechnung"}),
    )
    .await;
    create(
        &app,
        "correspondents",
        "ACME",
        json!({"algorithm": "fuzzy", "text": "ACME Suplies GmbH"}),
    )
    .await;
    create(
        &app,
        "correspondents",
        "Globex",
        json!({"algorithm": "any", "text": "globex"}),
    )
    .await;
    let (document_id, job) = app.upload(INVOICE).await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job, JobStatus::Succeeded).await;

    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("finance", true), ("letters", true), ("numbered", true)])
    );
    assert_eq!(
        correspondent_of(&app, document_id).await,
        Some(("ACME".to_owned(), true))
    );
    // The labels are in the search vector: "finance" is in no word of the text.
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            "/api/documents/search?q=finance",
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["documents"][0]["id"],
        document_id.to_string(),
        "{body}"
    );
    // Another tenant's rules see nothing of this tenant and the other way round.
    let (_, other) = app.add_tenant("tenant-b").await;
    let (status, body) = app.json_as(Method::GET, &other, "/api/tags", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tags"], json!([]), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_the_user_removed_or_set_is_never_touched_by_a_reanalysis() {
    let app = TestApp::spawn().await;
    create(
        &app,
        "tags",
        "finance",
        json!({"algorithm": "any", "text": "rechnung"}),
    )
    .await;
    create(
        &app,
        "tags",
        "acme",
        json!({"algorithm": "exact", "text": "acme supplies"}),
    )
    .await;
    create(
        &app,
        "correspondents",
        "ACME",
        json!({"algorithm": "any", "text": "acme"}),
    )
    .await;
    let (document_id, job) = app.upload(INVOICE).await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job, JobStatus::Succeeded).await;
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("acme", true), ("finance", true)])
    );

    // The user takes "finance" off, keeps "acme" as it is, adds "paid" of their own, and
    // clears the correspondent the rule set.
    patch_document(
        &app,
        document_id,
        json!({"tags": ["acme", "paid"], "correspondent": null}),
    )
    .await;
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("acme", true), ("paid", false)])
    );
    assert_eq!(correspondent_of(&app, document_id).await, None);

    // A rule for the user's own tag that does not match, and one that matches the tag
    // the user removed: neither changes the user's choice.
    let (status, body) = app
        .json_as(Method::GET, &app.token, "/api/tags?limit=10", None)
        .await;
    assert_eq!(status, 200, "{body}");
    let paid = body["tags"]
        .as_array()
        .and_then(|tags| tags.iter().find(|tag| tag["name"] == "paid"))
        .map(|tag| uuid_at(tag, "/id"))
        .expect("the user's tag is in the catalogue");
    let (status, body) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/tags/{paid}"),
            Some(json!({"rule": {"algorithm": "any", "text": "bezahlt"}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for _ in 0..2 {
        reanalyze(&app, document_id).await;
        assert_eq!(
            tags_of(&app, document_id).await,
            owned(&[("acme", true), ("paid", false)]),
            "a re-analysis put back a removed tag or took off the user's"
        );
        assert_eq!(correspondent_of(&app, document_id).await, None);
    }

    // The user puts "finance" back: from then on it is theirs.
    patch_document(
        &app,
        document_id,
        json!({"tags": ["acme", "finance", "paid"]}),
    )
    .await;
    reanalyze(&app, document_id).await;
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("acme", true), ("finance", false), ("paid", false)])
    );
    // A correspondent the user names is theirs too.
    patch_document(&app, document_id, json!({"correspondent": "ACME"})).await;
    reanalyze(&app, document_id).await;
    assert_eq!(
        correspondent_of(&app, document_id).await,
        Some(("ACME".to_owned(), false))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_rule_applies_at_the_next_analysis() {
    let app = TestApp::spawn().await;
    let finance = create(
        &app,
        "tags",
        "finance",
        json!({"algorithm": "any", "text": "rechnung"}),
    )
    .await;
    let letters = create(&app, "tags", "letters", json!({"algorithm": "none"})).await;
    let acme = create(
        &app,
        "correspondents",
        "ACME",
        json!({"algorithm": "any", "text": "acme"}),
    )
    .await;
    let globex = create(
        &app,
        "correspondents",
        "Globex",
        json!({"algorithm": "none"}),
    )
    .await;
    let (document_id, job) = app.upload(INVOICE).await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job, JobStatus::Succeeded).await;
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("finance", true)])
    );

    for (kind, id, rule) in [
        (
            "tags",
            finance,
            json!({"algorithm": "all", "text": "rechnung mahnung"}),
        ),
        (
            "tags",
            letters,
            json!({"algorithm": "exact", "text": "Frau Mueller", "case_insensitive": false}),
        ),
        (
            "correspondents",
            acme,
            json!({"algorithm": "regex", "text": "^Globex"}),
        ),
        (
            "correspondents",
            globex,
            json!({"algorithm": "fuzzy", "text": "acme suppliez"}),
        ),
    ] {
        let (status, body) = app
            .json_as(
                Method::PATCH,
                &app.token,
                &format!("/api/{kind}/{id}"),
                Some(json!({ "rule": rule })),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["rule"]["algorithm"], rule["algorithm"], "{body}");
        assert_eq!(body["rule"]["text"], rule["text"], "{body}");
    }
    // Nothing changes before the document is analyzed again.
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("finance", true)])
    );
    assert_eq!(
        correspondent_of(&app, document_id).await,
        Some(("ACME".to_owned(), true))
    );

    reanalyze(&app, document_id).await;
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("letters", true)])
    );
    assert_eq!(
        correspondent_of(&app, document_id).await,
        Some(("Globex".to_owned(), true))
    );
    // A renamed tag is found by its new name at once.
    let (status, body) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/tags/{letters}"),
            Some(json!({"name": "correspondence"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, found) = app
        .json_as(
            Method::GET,
            &app.token,
            "/api/documents/search?q=correspondence",
            None,
        )
        .await;
    assert_eq!(
        found["documents"][0]["id"],
        document_id.to_string(),
        "{found}"
    );
    // A deleted label comes off the document; a rule nobody has no longer applies.
    for (kind, id) in [("tags", letters), ("correspondents", globex)] {
        let (status, body) = app
            .json_as(
                Method::DELETE,
                &app.token,
                &format!("/api/{kind}/{id}"),
                None,
            )
            .await;
        assert_eq!(status, 204, "{body}");
        let (status, _) = app
            .json_as(Method::GET, &app.token, &format!("/api/{kind}/{id}"), None)
            .await;
        assert_eq!(status, 404);
    }
    assert_eq!(tags_of(&app, document_id).await, owned(&[]));
    assert_eq!(correspondent_of(&app, document_id).await, None);
    let (_, found) = app
        .json_as(
            Method::GET,
            &app.token,
            "/api/documents/search?q=correspondence",
            None,
        )
        .await;
    assert_eq!(found["documents"], json!([]), "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_and_malformed_rules_are_refused_before_they_are_stored() {
    let app = TestApp::spawn().await;
    let tag = create(
        &app,
        "tags",
        "finance",
        json!({"algorithm": "any", "text": "rechnung"}),
    )
    .await;
    let refused = [
        // Tiny to send, enormous once compiled.
        (
            json!({"algorithm": "regex", "text": r"(?:\w{1000}){1000}"}),
            422,
            "regex_too_large",
        ),
        (
            json!({"algorithm": "regex", "text": r"(?:(?:a{100}){100}){100}"}),
            422,
            "regex_too_large",
        ),
        (
            json!({"algorithm": "regex", "text": "(unclosed"}),
            422,
            "invalid_regex",
        ),
        (
            json!({"algorithm": "regex", "text": "a".repeat(257)}),
            422,
            "invalid_rule",
        ),
        (
            json!({"algorithm": "fuzzy", "text": "x".repeat(65)}),
            422,
            "invalid_rule",
        ),
        (
            json!({"algorithm": "any", "text": " -- "}),
            422,
            "invalid_rule",
        ),
        (
            json!({"algorithm": "exact", "text": "line\nbreak"}),
            422,
            "invalid_rule",
        ),
    ];
    for (rule, status, code) in &refused {
        let (got, body) = app
            .json_as(
                Method::POST,
                &app.token,
                "/api/tags",
                Some(json!({"name": "hostile", "rule": rule})),
            )
            .await;
        assert_eq!(
            (got, body["code"].as_str()),
            (*status, Some(*code)),
            "create {rule}: {body}"
        );
        let (got, body) = app
            .json_as(
                Method::PATCH,
                &app.token,
                &format!("/api/tags/{tag}"),
                Some(json!({"rule": rule})),
            )
            .await;
        assert_eq!(
            (got, body["code"].as_str()),
            (*status, Some(*code)),
            "patch {rule}: {body}"
        );
    }
    // An algorithm Quire does not know is not a rule at all.
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/tags",
            Some(json!({"name": "hostile", "rule": {"algorithm": "backtracking", "text": "a"}})),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_json")),
        "{body}"
    );
    // Nothing was stored, nothing was changed.
    let (_, body) = app
        .json_as(Method::GET, &app.token, "/api/tags", None)
        .await;
    let tags = body["tags"].as_array().expect("tags");
    assert_eq!(tags.len(), 1, "{body}");
    assert_eq!(
        tags[0]["rule"],
        json!({"algorithm": "any", "text": "rechnung", "case_insensitive": true})
    );
    // Names are checked like a document's tags; a taken name is a conflict.
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/tags",
            Some(json!({"name": "  "})),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_tags")),
        "{body}"
    );
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/tags",
            Some(json!({"name": "finance"})),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("tag_name_taken")),
        "{body}"
    );
    let other = create(&app, "tags", "other", json!({"algorithm": "none"})).await;
    let (status, body) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/tags/{other}"),
            Some(json!({"name": "finance"})),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("tag_name_taken")),
        "{body}"
    );
    // Another tenant's label is not found, whatever the method.
    let (_, stranger) = app.add_tenant("tenant-b").await;
    for method in [Method::GET, Method::PATCH, Method::DELETE] {
        let (status, _) = app
            .json_as(
                method.clone(),
                &stranger,
                &format!("/api/tags/{tag}"),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, 404, "{method}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_allowance_holds_under_concurrent_creates() {
    let app = TestApp::spawn().await;
    let allowance = quire_shared::actions::labels::MAX_RULES_PER_KIND as usize;
    let racers = 8;
    for n in 0..allowance - racers / 2 {
        create(
            &app,
            "correspondents",
            &format!("sender {n}"),
            json!({"algorithm": "any", "text": format!("s{n}")}),
        )
        .await;
    }
    let app = Arc::new(app);
    let barrier = Arc::new(Barrier::new(racers));
    let mut tasks = Vec::new();
    for n in 0..racers {
        let (app, barrier) = (app.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            app.json_as(
                Method::POST,
                &app.token,
                "/api/correspondents",
                Some(json!({"name": format!("racer {n}"), "rule": {"algorithm": "any", "text": "race"}})),
            )
            .await
        }));
    }
    let mut created = 0;
    for task in tasks {
        let (status, body) = task.await.expect("task");
        match status {
            201 => created += 1,
            422 => assert_eq!(body["code"], "too_many_rules", "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(
        created,
        racers / 2,
        "the allowance was overrun or underused"
    );
    // A label without a rule needs no allowance.
    create(
        &app,
        "correspondents",
        "plain",
        json!({"algorithm": "none"}),
    )
    .await;
}

/// The document's ETag, read with its view.
async fn etag_of(app: &TestApp, id: Uuid) -> String {
    let response = app
        .http
        .get(format!("{}/api/documents/{id}", app.address))
        .bearer_auth(&app.token)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 200);
    response
        .headers()
        .get("etag")
        .expect("the document view has an ETag")
        .to_str()
        .expect("ascii")
        .to_owned()
}

/// Sends a label change and expects it applied.
async fn change_label(app: &TestApp, method: Method, path: &str, body: Option<Value>) {
    let (status, answer) = app.json_as(method, &app.token, path, body).await;
    assert!(status == 200 || status == 204, "{status} {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_a_rule_sets_and_a_label_renamed_or_deleted_change_the_documents_etag() {
    let app = TestApp::spawn().await;
    let (document_id, job) = app.upload(INVOICE).await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job, JobStatus::Succeeded).await;
    let unlabelled = etag_of(&app, document_id).await;

    // A rule's label, set by the analysis: the view changed, so does its ETag, and an
    // edit from the version without it is refused.
    let finance = create(
        &app,
        "tags",
        "finance",
        json!({"algorithm": "any", "text": "rechnung"}),
    )
    .await;
    let acme = create(
        &app,
        "correspondents",
        "ACME",
        json!({"algorithm": "any", "text": "acme"}),
    )
    .await;
    reanalyze(&app, document_id).await;
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("finance", true)])
    );
    let labelled = etag_of(&app, document_id).await;
    assert_ne!(labelled, unlabelled);
    let (status, body) = {
        let response = app
            .http
            .patch(format!("{}/api/documents/{document_id}", app.address))
            .bearer_auth(&app.token)
            .header("If-Match", unlabelled.as_str())
            .json(&json!({"tags": []}))
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    assert_eq!(status, 412, "{body}");
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("finance", true)])
    );

    // A rule replaced under the same name shows nowhere on the document: same ETag.
    change_label(
        &app,
        Method::PATCH,
        &format!("/api/tags/{finance}"),
        Some(json!({"rule": {"algorithm": "all", "text": "rechnung lieferung"}})),
    )
    .await;
    assert_eq!(etag_of(&app, document_id).await, labelled);

    // A rename shows in the view of every document that carries the label.
    change_label(
        &app,
        Method::PATCH,
        &format!("/api/tags/{finance}"),
        Some(json!({"name": "accounts"})),
    )
    .await;
    assert_eq!(
        tags_of(&app, document_id).await,
        owned(&[("accounts", true)])
    );
    let renamed = etag_of(&app, document_id).await;
    assert_ne!(renamed, labelled);
    change_label(
        &app,
        Method::PATCH,
        &format!("/api/correspondents/{acme}"),
        Some(json!({"name": "ACME GmbH"})),
    )
    .await;
    assert_eq!(
        correspondent_of(&app, document_id).await,
        Some(("ACME GmbH".to_owned(), true))
    );
    let correspondent_renamed = etag_of(&app, document_id).await;
    assert_ne!(correspondent_renamed, renamed);

    // A deletion takes the label off: another view, another ETag.
    change_label(&app, Method::DELETE, &format!("/api/tags/{finance}"), None).await;
    assert_eq!(tags_of(&app, document_id).await, owned(&[]));
    let untagged = etag_of(&app, document_id).await;
    assert_ne!(untagged, correspondent_renamed);
    change_label(
        &app,
        Method::DELETE,
        &format!("/api/correspondents/{acme}"),
        None,
    )
    .await;
    assert_eq!(correspondent_of(&app, document_id).await, None);
    assert_ne!(etag_of(&app, document_id).await, untagged);
}
