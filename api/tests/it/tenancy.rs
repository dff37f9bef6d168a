//! The tenant lifecycle end to end: an operator creates a tenant, the dispatcher and a
//! worker provision it; suspension refuses writes in the API and jobs in the worker; the
//! admin CLI walk-through of the README runs against the real binary.

use quire_shared::db::{members, search_indexes};
use quire_shared::permissions::{CapabilitySet, MemberSpec};
use quire_shared::states::JobStatus;
use quire_shared::test_support::eventually;
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp, uuid_at};

async fn tenant_status(app: &TestApp, operator: &str, tenant_id: Uuid) -> Option<String> {
    let (status, body) = app
        .json_as(
            Method::GET,
            operator,
            &format!("/api/admin/tenants/{tenant_id}"),
            None,
        )
        .await;
    (status == 200).then(|| {
        body["tenant"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    })
}

async fn wait_for_tenant_status(app: &TestApp, operator: &str, tenant_id: Uuid, wanted: &str) {
    eventually(
        DEADLINE,
        &format!("tenant {tenant_id} is {wanted}"),
        || async {
            (tenant_status(app, operator, tenant_id).await.as_deref() == Some(wanted)).then_some(())
        },
    )
    .await;
}

#[derive(Debug, PartialEq, Eq)]
struct Materialized {
    sets: Vec<(String, Vec<String>)>,
    members: Vec<(Uuid, CapabilitySet)>,
    has_index: bool,
}

async fn materialized(app: &TestApp, tenant_id: Uuid) -> Materialized {
    #[derive(diesel::QueryableByName)]
    struct Set {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
        #[diesel(sql_type = diesel::sql_types::Array<diesel::sql_types::Text>)]
        permissions: Vec<String>,
    }
    let mut conn = app.pool.get().await.expect("connection");
    let sets: Vec<Set> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(
            "SELECT name, permissions FROM capability_sets WHERE tenant_id = $1 ORDER BY name",
        )
        .bind::<diesel::sql_types::Uuid, _>(tenant_id),
        &mut conn,
    )
    .await
    .expect("sets");
    let mut listed: Vec<(Uuid, CapabilitySet)> = members::list_members(&mut conn, tenant_id)
        .await
        .expect("members")
        .into_iter()
        .map(|member| (member.user_id, member.capability_set))
        .collect();
    listed.sort_by_key(|(user, _)| *user);
    Materialized {
        sets: sets
            .into_iter()
            .map(|set| (set.name, set.permissions))
            .collect(),
        members: listed,
        has_index: search_indexes::exists(&mut conn, tenant_id)
            .await
            .expect("index"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_creates_a_tenant_and_the_queue_provisions_it() {
    let app = TestApp::spawn().await;
    let operator = app.context.operator_token();
    let (owner, user, reader) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let (status, body) = app
        .json_as(
            Method::POST,
            &operator,
            "/api/admin/tenants",
            Some(json!({
                "name": "acme",
                "members": [owner, user, { "user_id": reader, "capability_set": "readonly" }]
            })),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["tenant"]["status"], "creating");
    assert_eq!(body["job"]["type"], "provision-tenant");
    let tenant_id = uuid_at(&body, "/tenant/id");
    let job_id = uuid_at(&body, "/job/id");

    // A user token is not an operator token, and a creating tenant serves nobody.
    let (status, _) = app
        .json_as(Method::GET, &app.token, "/api/admin/tenants", None)
        .await;
    assert_eq!(status, 401);
    let owner_token = app.context.token_for(tenant_id, owner);
    let (status, body) = app
        .json_as(Method::GET, &owner_token, "/api/documents", None)
        .await;
    assert_eq!((status, body["code"].as_str()), (403, Some("not_a_member")));

    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job_id, JobStatus::Succeeded).await;
    wait_for_tenant_status(&app, &operator, tenant_id, "active").await;

    let first = materialized(&app, tenant_id).await;
    assert_eq!(first.sets.len(), 4, "{first:?}");
    assert!(first.has_index);
    let mut expected = vec![
        (owner, CapabilitySet::Owner),
        (user, CapabilitySet::User),
        (reader, CapabilitySet::Readonly),
    ];
    expected.sort_by_key(|(user, _)| *user);
    assert_eq!(first.members, expected);

    // Provisioning's steps run again (a re-run after a crash) change nothing.
    {
        let mut conn = app.pool.get().await.expect("connection");
        let again = [
            MemberSpec::User(owner),
            MemberSpec::User(user),
            MemberSpec::User(reader),
        ];
        search_indexes::ensure(&mut conn, tenant_id, "simple")
            .await
            .expect("index");
        members::materialize(&mut conn, tenant_id, &again)
            .await
            .expect("again");
    }
    assert_eq!(materialized(&app, tenant_id).await, first);

    let response = app
        .upload_as(
            &owner_token,
            b"the first document of acme".to_vec(),
            "a.txt",
        )
        .await;
    assert_eq!(response.status(), 201);

    // The name is taken now, whatever its case of spaces.
    let (status, body) = app
        .json_as(
            Method::POST,
            &operator,
            "/api/admin/tenants",
            Some(json!({ "name": " acme ", "members": [owner] })),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("tenant_name_taken"))
    );
    let (status, body) = app
        .json_as(
            Method::POST,
            &operator,
            "/api/admin/tenants",
            Some(json!({ "name": "nobody", "members": [] })),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_members"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_tenant_reads_but_neither_writes_nor_runs_jobs() {
    let app = TestApp::spawn().await;
    let operator = app.context.operator_token();
    let (document_id, job_id) = app.upload(b"uploaded while active").await;
    let suspend = format!("/api/admin/tenants/{}/suspend", app.tenant_id);
    let (status, body) = app.json_as(Method::POST, &operator, &suspend, None).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("suspended")),
        "{body}"
    );
    let (status, body) = app.json_as(Method::POST, &operator, &suspend, None).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("tenant_state")));
    assert_eq!(body["current_status"], "suspended");

    let response = app
        .upload_as(&app.token, b"refused".to_vec(), "b.txt")
        .await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "tenant_suspended");
    let (status, body) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/documents/{document_id}"),
            Some(json!({ "title": "renamed" })),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("tenant_suspended"))
    );
    let (status, _) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/{document_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);

    // The job queued while the tenant was active fails at once, without running.
    app.start_dispatcher();
    let _worker = app.start_worker();
    let job = app.wait_for_job(job_id, JobStatus::Failed).await;
    assert_eq!(job.error_code.as_deref(), Some("tenant_inactive"));
    assert_eq!(job.attempts, 1);

    let activate = format!("/api/admin/tenants/{}/activate", app.tenant_id);
    let (status, body) = app.json_as(Method::POST, &operator, &activate, None).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("active")));
    let response = app
        .upload_as(&app.token, b"accepted again".to_vec(), "c.txt")
        .await;
    assert_eq!(response.status(), 201);
}

/// The README's admin walk-through, with the real `quire-admin` binary: create a tenant,
/// mint a member token, suspend, reset, delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_walk_through_of_the_readme_works() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let (owner, stranger) = (Uuid::now_v7().to_string(), Uuid::now_v7().to_string());
    let run = |args: &[&str]| {
        let (ok, out, err) = app.admin_cli(args);
        assert!(ok, "quire-admin {args:?} failed: {err}");
        out
    };

    let tenant = run(&["tenant", "create", "--name", "walk", "--owner", &owner]);
    let tenant_id = Uuid::parse_str(&tenant).expect("tenant id");
    assert_eq!(
        run(&[
            "tenant",
            "create",
            "--name",
            "walk",
            "--owner",
            &owner,
            "--if-missing"
        ]),
        tenant
    );
    let token = run(&["token", "--tenant", "walk", "--user", &owner]);
    let (ok, _, err) = app.admin_cli(&["token", "--tenant", "walk", "--user", &stranger]);
    assert!(!ok && err.contains("not a member"), "{err}");
    let response = app
        .upload_as(&token, b"walk-through bytes".to_vec(), "w.txt")
        .await;
    assert_eq!(response.status(), 201);

    assert!(run(&["tenant", "suspend", "--tenant", &tenant]).contains("suspended"));
    let response = app
        .upload_as(&token, b"while suspended".to_vec(), "s.txt")
        .await;
    assert_eq!(response.status(), 403);

    let out = run(&[
        "tenant",
        "reset",
        "--tenant",
        &tenant,
        "--name",
        "walk",
        "--final-status",
        "active",
    ]);
    assert!(out.contains("SUCCEEDED"), "{out}");
    let (status, body) = app
        .json_as(Method::GET, &token, "/api/documents", None)
        .await;
    assert_eq!(status, 200, "the owner keeps access after a reset: {body}");
    assert_eq!(
        body["documents"].as_array().map(Vec::len),
        Some(0),
        "{body}"
    );

    let (ok, _, err) = app.admin_cli(&[
        "tenant",
        "delete",
        "--tenant",
        &tenant,
        "--name",
        "not-walk",
        "--remove-tenant",
    ]);
    assert!(!ok && err.contains("tenant_mismatch"), "{err}");
    let out = run(&[
        "tenant",
        "delete",
        "--tenant",
        &tenant,
        "--name",
        "walk",
        "--remove-tenant",
    ]);
    assert!(out.contains("removed"), "{out}");
    assert!(!run(&["tenant", "list"]).contains(&tenant));
    let (status, _) = app
        .json_as(Method::GET, &token, "/api/documents", None)
        .await;
    assert_eq!(status, 401, "a deleted tenant's token is as good as none");
    // The jobs outlive the tenant as its audit record.
    let mut conn = app.pool.get().await.expect("connection");
    let audit = quire_shared::db::jobs::list_tenant_jobs(&mut conn, tenant_id)
        .await
        .expect("jobs");
    let kinds: Vec<(&str, JobStatus)> = audit
        .iter()
        .map(|job| (job.job_type.as_str(), job.status))
        .collect();
    assert_eq!(
        kinds,
        [
            ("provision-tenant", JobStatus::Succeeded),
            ("delete-tenant", JobStatus::Succeeded),
            ("delete-tenant", JobStatus::Succeeded),
        ]
    );
}
