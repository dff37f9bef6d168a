//! What each capability set may do, what a non-member may do (nothing), and the member
//! routes, including the last-owner rule under a real race.

use std::sync::Arc;

use quire_api::routes::{DOCUMENTATION_ROUTES, ROUTES};
use quire_shared::permissions::CapabilitySet;
use reqwest::Method;
use serde_json::json;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::helpers::TestApp;

/// Adds a member through the API (as the owner) and returns their token.
async fn member_with(app: &TestApp, set: &str) -> String {
    let user = Uuid::now_v7();
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/members",
            Some(json!({ "user_id": user, "capability_set": set })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["capability_set"], set);
    app.context.token_for(app.tenant_id, user)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_capability_set_may_do_exactly_what_it_grants() {
    let app = TestApp::spawn().await;
    let (document_id, _) = app.upload(b"a document everyone may read").await;
    // (set, may write documents, may manage members)
    let sets = [
        ("owner", true, true),
        ("user", true, false),
        ("readonly", false, false),
        ("webdav", true, false),
    ];
    for (set, writes, manages) in sets {
        let token = member_with(&app, set).await;
        let read = app
            .json_as(
                Method::GET,
                &token,
                &format!("/api/documents/{document_id}"),
                None,
            )
            .await;
        assert_eq!(read.0, 200, "{set} reads: {}", read.1);
        let jobs = app
            .json_as(
                Method::GET,
                &token,
                &format!("/api/documents/{document_id}/processing-jobs"),
                None,
            )
            .await;
        assert_eq!(jobs.0, 200, "{set} inspects jobs");

        let upload = app
            .upload_as(&token, format!("written by {set}").into_bytes(), "w.txt")
            .await
            .status()
            .as_u16();
        let edit = app
            .json_as(
                Method::PATCH,
                &token,
                &format!("/api/documents/{document_id}"),
                Some(json!({ "title": format!("edited by {set}") })),
            )
            .await;
        let verify = app
            .json_as(
                Method::POST,
                &token,
                "/api/documents/verify",
                Some(json!({ "ids": [document_id] })),
            )
            .await;
        for (what, status, body) in [
            ("upload", upload, serde_json::Value::Null),
            ("edit", edit.0, edit.1),
            ("verify", verify.0, verify.1),
        ] {
            if writes {
                assert!(status < 400, "{set} may {what}: {status} {body}");
            } else {
                assert_eq!(status, 403, "{set} may not {what}");
            }
        }

        let list = app.json_as(Method::GET, &token, "/api/members", None).await;
        let add = app
            .json_as(
                Method::POST,
                &token,
                "/api/members",
                Some(json!({ "user_id": Uuid::now_v7(), "capability_set": "user" })),
            )
            .await;
        for (what, (status, body)) in [("list members", list), ("add a member", add)] {
            if manages {
                assert!(status < 400, "{set} may {what}: {status} {body}");
            } else {
                assert_eq!(
                    (status, body["code"].as_str()),
                    (403, Some("permission_denied")),
                    "{set} may not {what}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_a_non_member_is_refused_on_every_route() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"not for strangers").await;
    let stranger = app.context.token_for(app.tenant_id, Uuid::now_v7());
    let mut walked = 0;
    for (method, path) in ROUTES {
        let open = ["/healthz", "/readyz"].contains(path) || DOCUMENTATION_ROUTES.contains(path);
        if open || path.starts_with("/api/admin/") {
            continue;
        }
        let path = path
            .replace("{document_id}", &document_id.to_string())
            .replace("{job_id}", &job_id.to_string())
            .replace("{user_id}", &Uuid::now_v7().to_string())
            .replace("{version_id}", &Uuid::now_v7().to_string());
        let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
        let (status, body) = app
            .json_as(method.clone(), &stranger, &path, Some(json!({})))
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (403, Some("not_a_member")),
            "{method} {path}: {body}"
        );
        walked += 1;
    }
    assert!(walked >= 15, "walked {walked} routes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_managed_and_a_tenant_always_keeps_an_owner() {
    let app = TestApp::spawn().await;
    let (status, body) = app
        .json_as(Method::GET, &app.token, "/api/members", None)
        .await;
    assert_eq!(status, 200);
    let me = body["members"][0]["user_id"]
        .as_str()
        .expect("owner")
        .to_owned();

    let demote_me = Some(json!({ "capability_set": "user" }));
    let (status, body) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/members/{me}"),
            demote_me.clone(),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("last_owner")));
    let (status, body) = app
        .json_as(
            Method::DELETE,
            &app.token,
            &format!("/api/members/{me}"),
            None,
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("last_owner")));

    let other = Uuid::now_v7();
    let add = Some(json!({ "user_id": other, "capability_set": "readonly" }));
    let (status, _) = app
        .json_as(Method::POST, &app.token, "/api/members", add.clone())
        .await;
    assert_eq!(status, 201);
    let (status, body) = app
        .json_as(Method::POST, &app.token, "/api/members", add)
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("already_member"))
    );
    let (status, body) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/members/{other}"),
            Some(json!({ "capability_set": "sudo" })),
        )
        .await;
    assert_eq!(status, 400, "an unknown set is refused: {body}");
    let (status, _) = app
        .json_as(
            Method::DELETE,
            &app.token,
            &format!("/api/members/{other}"),
            None,
        )
        .await;
    assert_eq!(status, 204);
    let (status, _) = app
        .json_as(
            Method::DELETE,
            &app.token,
            &format!("/api/members/{other}"),
            None,
        )
        .await;
    assert_eq!(status, 404);
    let other_token = app.context.token_for(app.tenant_id, other);
    let (status, body) = app
        .json_as(Method::GET, &other_token, "/api/documents", None)
        .await;
    assert_eq!((status, body["code"].as_str()), (403, Some("not_a_member")));
}

/// Two owners demote each other at the same instant, round after round (a fresh tenant
/// each): the tenant lock makes exactly one of them win, never both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_owners_demoting_each_other_at_once_leave_one_owner() {
    let app = Arc::new(TestApp::spawn().await);
    for round in 0..10 {
        let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
        let (tenant_id, first_token) = app
            .context
            .provisioned_tenant(&format!("race-{round}"), first)
            .await;
        let (status, _) = app
            .json_as(
                Method::POST,
                &first_token,
                "/api/members",
                Some(json!({ "user_id": second, "capability_set": "owner" })),
            )
            .await;
        assert_eq!(status, 201);
        let barrier = Arc::new(Barrier::new(2));
        let demote = |by: Uuid, target: Uuid| {
            let (app, barrier) = (Arc::clone(&app), Arc::clone(&barrier));
            tokio::spawn(async move {
                let token = app.context.token_for(tenant_id, by);
                barrier.wait().await;
                app.json_as(
                    Method::PATCH,
                    &token,
                    &format!("/api/members/{target}"),
                    Some(json!({ "capability_set": "user" })),
                )
                .await
                .0
            })
        };
        let (a, b) = (demote(first, second), demote(second, first));
        let mut statuses = [a.await.expect("task"), b.await.expect("task")];
        statuses.sort();
        // The loser was either refused as the last owner, or had lost the permission by
        // the time its request was resolved.
        assert!(
            statuses[0] == 200 && matches!(statuses[1], 403 | 409),
            "round {round}: {statuses:?}"
        );
        let mut conn = app.pool.get().await.expect("connection");
        let owners = quire_shared::db::members::list_members(&mut conn, tenant_id)
            .await
            .expect("members")
            .into_iter()
            .filter(|member| member.capability_set == CapabilitySet::Owner)
            .count();
        assert_eq!(owners, 1, "round {round}");
    }
}
