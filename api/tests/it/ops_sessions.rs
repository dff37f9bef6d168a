//! Dashboard sessions (issue 14, item 5): a session is a server-side row opened by a real
//! operator token, never outliving it, never renewing itself, never standing in for an
//! operator token on `/api/admin`, gone at logout or when an operator revokes it, and
//! its cookies are `Secure` outside development.

use std::time::Duration;

use quire_shared::config::{Profile, Settings, SettingsSource, workspace_config_dir};
use quire_shared::test_support::{DEADLINE, TestContext, eventually};

use crate::helpers::TestApp;

fn field(html: &str, name: &str) -> String {
    html.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no {name} field in the page"))
        .to_owned()
}

/// The whole `Set-Cookie` header of the cookie `name`, if the response sets it.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap_or_default().to_owned()
}

/// A browser without script: the sign-in form's cookie and CSRF token, then a post.
struct Client {
    http: reqwest::Client,
    address: String,
}

/// What a sign-in answered: its status and the session cookie it set, if any.
struct SignIn {
    status: u16,
    session: Option<String>,
    login_cookie: String,
}

impl Client {
    fn new(app: &TestApp) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        Self {
            http,
            address: app.address.clone(),
        }
    }

    /// Loads the sign-in form and posts `token` with it.
    async fn sign_in(&self, token: &str) -> SignIn {
        let form = self
            .http
            .get(format!("{}/ops/login", self.address))
            .send()
            .await
            .expect("sign-in form");
        let login_cookie = set_cookie(&form, "ops_login").expect("a pre-session cookie");
        let csrf = field(&form.text().await.expect("html"), "csrf");
        let answer = self
            .http
            .post(format!("{}/ops/login", self.address))
            .header("cookie", pair(&login_cookie))
            .form(&[("token", token), ("csrf", csrf.as_str())])
            .send()
            .await
            .expect("sign in");
        SignIn {
            status: answer.status().as_u16(),
            session: set_cookie(&answer, "ops_session"),
            login_cookie,
        }
    }

    /// Signs in with `token`, which must open a session; the session cookie's header.
    async fn session(&self, token: &str) -> String {
        let signed_in = self.sign_in(token).await;
        assert_eq!(signed_in.status, 303, "an operator token signs in");
        signed_in.session.expect("a session cookie")
    }

    /// The overview with this session cookie: 200, or 303 to the sign-in form.
    async fn overview(&self, session: &str) -> reqwest::Response {
        self.http
            .get(format!("{}/ops", self.address))
            .header("cookie", pair(session))
            .send()
            .await
            .expect("overview")
    }

    /// Whether the session opens the overview (else it is sent to the sign-in form).
    async fn is_signed_in(&self, session: &str) -> bool {
        let page = self.overview(session).await;
        match page.status().as_u16() {
            200 => true,
            303 => {
                assert_eq!(
                    page.headers()
                        .get("location")
                        .and_then(|value| value.to_str().ok()),
                    Some("/ops/login")
                );
                false
            }
            other => panic!("the overview answered {other}"),
        }
    }

    /// The CSRF token of the overview's forms.
    async fn csrf(&self, session: &str) -> String {
        let page = self.overview(session).await;
        assert_eq!(page.status(), 200);
        field(&page.text().await.expect("html"), "csrf")
    }

    async fn post(&self, path: &str, session: &str, csrf: &str) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.address))
            .header("cookie", pair(session))
            .form(&[("csrf", csrf)])
            .send()
            .await
            .expect("post")
    }
}

/// The session id a session cookie carries.
fn value(session: &str) -> String {
    pair(session)
        .split_once('=')
        .map(|(_, value)| value.to_owned())
        .unwrap_or_default()
}

/// `Max-Age` of a `Set-Cookie` header, in seconds.
fn max_age(set_cookie: &str) -> i64 {
    set_cookie
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Max-Age="))
        .and_then(|age| age.parse().ok())
        .expect("a Max-Age")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_when_the_operator_token_that_opened_it_expires() {
    let app = TestApp::spawn().await;
    let client = Client::new(&app);
    let short = quire_shared::auth::mint_admin(
        &app.context.settings.auth,
        "short-lived",
        Duration::from_secs(2),
    )
    .expect("mint");
    let session = client.session(&short).await;
    assert!(
        max_age(&session) <= 2,
        "the cookie lives no longer than the token: {session}"
    );
    assert!(client.is_signed_in(&session).await);
    eventually(DEADLINE, "the session ends with its token", || async {
        (!client.is_signed_in(&session).await).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cannot_renew_itself_by_signing_in_with_its_own_id() {
    let app = TestApp::spawn().await;
    let client = Client::new(&app);
    let session = client.session(&app.context.operator_token()).await;
    let renewed = client.sign_in(&value(&session)).await;
    assert_eq!(renewed.status, 401, "a session id is not an operator token");
    assert!(renewed.session.is_none(), "and opens no session");
    let renewed = client.sign_in(&pair(&session)).await;
    assert_eq!(renewed.status, 401, "nor is the cookie");
    assert!(renewed.session.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_refuse_a_dashboard_session_as_bearer_or_cookie() {
    let app = TestApp::spawn().await;
    let client = Client::new(&app);
    let session = client.session(&app.context.operator_token()).await;
    let url = format!("{}/api/admin/tenants", app.address);
    let as_bearer = client
        .http
        .get(&url)
        .bearer_auth(value(&session))
        .send()
        .await
        .expect("get");
    assert_eq!(
        as_bearer.status(),
        401,
        "a session is not an operator token"
    );
    let as_cookie = client
        .http
        .get(&url)
        .header("cookie", pair(&session))
        .send()
        .await
        .expect("get");
    assert_eq!(as_cookie.status(), 401, "nor is its cookie");
    let operator = client
        .http
        .get(&url)
        .bearer_auth(app.context.operator_token())
        .send()
        .await
        .expect("get");
    assert_eq!(operator.status(), 200, "an operator token is");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_logout_the_old_session_cookie_opens_nothing() {
    let app = TestApp::spawn().await;
    let client = Client::new(&app);
    let session = client.session(&app.context.operator_token()).await;
    let csrf = client.csrf(&session).await;
    let logout = client.post("/ops/logout", &session, &csrf).await;
    assert_eq!(logout.status(), 303);

    assert!(
        !client.is_signed_in(&session).await,
        "the replayed cookie is sent to the sign-in form"
    );
    let job = uuid::Uuid::now_v7();
    let action = client
        .post(&format!("/ops/jobs/{job}/cancel"), &session, &csrf)
        .await;
    assert_eq!(action.status(), 401, "and may not press a button");
    let again = client.post("/ops/logout", &session, &csrf).await;
    assert_eq!(again.status(), 401, "a session ends once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_and_revokes_sessions_with_quire_admin() {
    let app = TestApp::spawn().await;
    let client = Client::new(&app);
    let kept = client.session(&app.context.operator_token()).await;
    let other = quire_shared::auth::mint_admin(
        &app.context.settings.auth,
        "someone-else",
        Duration::from_secs(600),
    )
    .expect("mint");
    let revoked = client.session(&other).await;

    let (ok, listed, stderr) = app.admin_cli(&["sessions", "list"]);
    assert!(ok, "{stderr}");
    let line = listed
        .lines()
        .find(|line| line.contains("someone-else"))
        .unwrap_or_else(|| panic!("the session is listed: {listed}"));
    assert!(listed.contains("test-operator"), "{listed}");
    assert!(
        !listed.contains(&value(&revoked)),
        "the list never shows a session's secret"
    );
    let id = line.split_whitespace().next().expect("an id first");

    let (ok, out, stderr) = app.admin_cli(&["sessions", "revoke", id]);
    assert!(ok, "{stderr}");
    assert!(out.contains("revoked 1"), "{out}");
    assert!(!client.is_signed_in(&revoked).await, "the revoked one ends");
    assert!(client.is_signed_in(&kept).await, "the other stays");

    let (ok, out, stderr) = app.admin_cli(&["sessions", "revoke", "--operator", "test-operator"]);
    assert!(ok, "{stderr}");
    assert!(out.contains("revoked 1"), "{out}");
    assert!(!client.is_signed_in(&kept).await);
}

/// Both dashboard cookies, set by the sign-in form and by a sign-in.
async fn dashboard_cookies(app: &TestApp) -> Vec<String> {
    let client = Client::new(app);
    let signed_in = client.sign_in(&app.context.operator_token()).await;
    assert_eq!(signed_in.status, 303);
    vec![
        signed_in.login_cookie,
        signed_in.session.expect("a session cookie"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_cookies_are_secure_outside_development_only() {
    let app = TestApp::spawn().await;
    for cookie in dashboard_cookies(&app).await {
        for flag in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/ops"] {
            assert!(cookie.contains(flag), "{flag} missing: {cookie}");
        }
    }

    // The development profile's own setting (plain http on localhost).
    let development = Settings::from_source(&SettingsSource {
        config_dir: workspace_config_dir(),
        profile: Profile::Development,
        env: Default::default(),
    })
    .expect("development settings");
    let mut context = TestContext::new().await;
    context.settings.ops = development.ops;
    let app = TestApp::spawn_in(context).await;
    for cookie in dashboard_cookies(&app).await {
        assert!(
            !cookie.contains("Secure"),
            "not Secure on plain http: {cookie}"
        );
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/ops"] {
            assert!(cookie.contains(flag), "{flag} missing: {cookie}");
        }
    }
}
