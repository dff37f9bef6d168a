//! Hostile input: each case asserts the status, the problem `code`, and that nothing
//! was stored and nothing enqueued (or, for inputs that are cleaned and accepted, what
//! was kept).

use bytes::Bytes;
use diesel_async::RunQueryDsl;
use quire_shared::db::schema::{documents, processing_jobs};
use quire_shared::test_support::TestContext;
use reqwest::multipart::{Form, Part};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::TestApp;

const LIMIT: u64 = 64 * 1024;

async fn app() -> TestApp {
    let mut context = TestContext::new().await;
    context.settings.server.max_upload_bytes = LIMIT;
    TestApp::spawn_in(context).await
}

/// Nothing recorded and no byte left in storage.
async fn assert_nothing_recorded(app: &TestApp) {
    let mut conn = app.pool.get().await.expect("connection");
    let documents: i64 = diesel::QueryDsl::count(documents::table)
        .get_result(&mut conn)
        .await
        .expect("count");
    let jobs: i64 = diesel::QueryDsl::count(processing_jobs::table)
        .get_result(&mut conn)
        .await
        .expect("count");
    assert_eq!((documents, jobs), (0, 0), "rows were recorded");
    let files = walk(app.context.data_dir.path());
    assert!(files.is_empty(), "bytes were stored: {files:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

async fn problem(response: reqwest::Response, status: StatusCode, code: &str) -> Value {
    assert_eq!(response.status(), status, "status");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(content_type, "application/problem+json");
    let body: Value = response.json().await.expect("problem json");
    assert_eq!(body["code"], code, "{body}");
    assert!(body["request_id"].as_str().is_some_and(|id| !id.is_empty()));
    let text = body.to_string();
    for leak in [
        "SQLSTATE",
        "diesel",
        "tokio",
        "/tmp",
        "redis://",
        "postgres://",
        "tenants/",
        "panicked",
    ] {
        assert!(!text.contains(leak), "problem leaks {leak:?}: {text}");
    }
    body
}

fn file_form(bytes: Vec<u8>, filename: &str, mime: &str) -> Form {
    Form::new().part(
        "file",
        Part::bytes(bytes)
            .file_name(filename.to_owned())
            .mime_str(mime)
            .expect("mime"),
    )
}

async fn post_form(app: &TestApp, form: Form) -> reqwest::Response {
    app.http
        .post(format!("{}/api/documents", app.address))
        .bearer_auth(&app.token)
        .multipart(form)
        .send()
        .await
        .expect("request")
}

/// A raw multipart body with one file part, for requests reqwest would not make.
fn raw_multipart(content: &[u8]) -> (String, Vec<u8>) {
    let boundary = "quire-hostile-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\
         Content-Type: text/plain\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_uploads_are_refused_before_anything_is_stored() {
    let app = app().await;
    let big = vec![b'a'; (LIMIT * 3) as usize];

    // Declared length over the limit.
    problem(
        post_form(&app, file_form(big.clone(), "big.txt", "text/plain")).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;

    // No declared length at all: chunked, cut off while streaming.
    let (content_type, body) = raw_multipart(&big);
    let chunks: Vec<Result<Bytes, std::io::Error>> = body
        .chunks(8 * 1024)
        .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
        .collect();
    let response = app
        .http
        .post(format!("{}/api/documents", app.address))
        .bearer_auth(&app.token)
        .header("content-type", content_type)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .expect("request");
    problem(response, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;
    assert_nothing_recorded(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_shorter_than_its_multipart_claims_is_refused() {
    let app = app().await;
    // Content-Length covers half the body: the multipart never closes.
    let (content_type, body) = raw_multipart(b"a file whose body is cut in the middle of its part");
    let half = body[..body.len() / 2].to_vec();
    let response = app
        .http
        .post(format!("{}/api/documents", app.address))
        .bearer_auth(&app.token)
        .header("content-type", content_type)
        .body(half)
        .send()
        .await
        .expect("request");
    problem(response, StatusCode::BAD_REQUEST, "invalid_multipart").await;
    assert_nothing_recorded(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_uploads_are_refused_with_their_own_code() {
    let app = app().await;
    let cases: Vec<(&str, Form, StatusCode, &str)> = vec![
        (
            "empty file",
            file_form(Vec::new(), "empty.txt", "text/plain"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "empty_file",
        ),
        (
            "html sent as pdf",
            file_form(
                b"<!DOCTYPE html><html><script>alert(1)</script></html>".to_vec(),
                "x.pdf",
                "application/pdf",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "svg sent as pdf",
            file_form(
                b"<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>".to_vec(),
                "x.pdf",
                "application/pdf",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "zip archive",
            file_form(
                b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec(),
                "x.zip",
                "application/zip",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "executable spoofed as png",
            file_form(
                b"MZ\x90\x00\x03\x00\x00\x00\x04\x00".to_vec(),
                "x.png",
                "image/png",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "binary junk",
            file_form(
                vec![0, 159, 146, 150, 0, 1, 2, 3],
                "x.bin",
                "application/octet-stream",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "binary after a utf-16 byte order mark",
            file_form(
                b"\xFF\xFE\x00\x00\x01\x00\x02\xD8\x1B\x00".to_vec(),
                "x.txt",
                "text/plain",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "html in utf-16",
            file_form(
                "\u{FEFF}<html><script>alert(1)</script>"
                    .encode_utf16()
                    .flat_map(u16::to_le_bytes)
                    .collect(),
                "x.txt",
                "text/plain",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "high bytes among control bytes",
            file_form(
                b"caf\xe9\x01\x02\xfc\x1b[2J\x7f\x90".to_vec(),
                "x.txt",
                "text/plain",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_file_type",
        ),
        (
            "no file part",
            Form::new().text("title", "no file"),
            StatusCode::BAD_REQUEST,
            "missing_file",
        ),
        (
            "two file parts",
            file_form(b"one".to_vec(), "1.txt", "text/plain")
                .part("file", Part::bytes(b"two".to_vec()).file_name("2.txt")),
            StatusCode::BAD_REQUEST,
            "multiple_files",
        ),
        (
            "unknown part",
            file_form(b"text".to_vec(), "a.txt", "text/plain").text("status", "READY"),
            StatusCode::BAD_REQUEST,
            "unknown_part",
        ),
        (
            "injected tenant part",
            file_form(b"text".to_vec(), "a.txt", "text/plain")
                .text("tenant_id", Uuid::now_v7().to_string()),
            StatusCode::BAD_REQUEST,
            "unknown_part",
        ),
        (
            "title too long",
            file_form(b"text".to_vec(), "a.txt", "text/plain").text("title", "t".repeat(501)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "title_too_long",
        ),
        (
            "title with a bidirectional override",
            file_form(b"text".to_vec(), "a.txt", "text/plain").text("title", "invoice\u{202E}fdp"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_title",
        ),
        (
            "title with a control character",
            file_form(b"text".to_vec(), "a.txt", "text/plain").text("title", "line\u{1b}[2J"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_title",
        ),
    ];
    for (case, form, status, code) in cases {
        let response = post_form(&app, form).await;
        assert_eq!(response.status(), status, "{case}");
        problem(response, status, code).await;
    }
    // Not multipart at all.
    let response = app
        .http
        .post(format!("{}/api/documents", app.address))
        .bearer_auth(&app.token)
        .json(&json!({ "file": "aGVsbG8=" }))
        .send()
        .await
        .expect("request");
    problem(
        response,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_content_type",
    )
    .await;
    assert_nothing_recorded(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_filenames_are_kept_for_display_only_and_cleaned() {
    let app = app().await;
    let long = "n".repeat(1_000) + ".txt";
    // `None`: a name no HTTP header may carry, refused as malformed multipart.
    let cases: [(&str, Option<&str>); 6] = [
        ("../../etc/passwd", Some("passwd")),
        ("C:\\Windows\\system32\\evil.txt", Some("evil.txt")),
        ("nul\u{0}byte.txt", None),
        ("crlf\r\nSet-Cookie: x=1.txt", None),
        ("invoice\u{202E}fdp.txt", Some("invoicefdp.txt")),
        (long.as_str(), Some(&long[..255])),
    ];
    for (index, (raw, shown)) in cases.iter().enumerate() {
        let body = format!("document number {index}").into_bytes();
        let response = post_form(&app, file_form(body, raw, "text/plain")).await;
        match shown {
            Some(shown) => {
                assert_eq!(response.status(), 201, "{raw:?}");
                let created: Value = response.json().await.expect("json");
                assert_eq!(
                    created["document"]["current_version"]["original_filename"], *shown,
                    "{raw:?}"
                );
            }
            None => {
                problem(response, StatusCode::BAD_REQUEST, "invalid_multipart").await;
            }
        }
    }
    // Whatever the name, bytes live under keys made of ids only.
    for path in walk(app.context.data_dir.path()) {
        let relative = path
            .strip_prefix(app.context.data_dir.path())
            .expect("inside");
        let text = relative.to_string_lossy();
        assert!(
            text.starts_with("tenants/") && text.contains("/sources/"),
            "{text}"
        );
        assert!(
            !text.contains("..") && !text.contains("passwd") && !text.contains("evil"),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_bytes_twice_in_one_tenant_conflict_but_not_across_tenants() {
    let app = app().await;
    let bytes = b"a contract signed twice".to_vec();
    let (first, _) = app.upload(&bytes).await;
    let again = post_form(&app, file_form(bytes.clone(), "again.txt", "text/plain")).await;
    let body = problem(again, StatusCode::CONFLICT, "duplicate_document").await;
    assert_eq!(body["existing_document_id"], first.to_string());

    let (_, token_b) = app.add_tenant("tenant-b").await;
    let theirs = app.upload_as(&token_b, bytes, "theirs.txt").await;
    assert_eq!(theirs.status(), 201, "another tenant is unaffected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_duplicates_allowed_the_same_bytes_twice_are_two_documents_with_jobs() {
    let mut context = TestContext::new().await;
    context.settings.server.reject_duplicate_uploads = false;
    let app = TestApp::spawn_in(context).await;
    let bytes = b"a receipt kept twice on purpose".to_vec();
    let (first, first_job) = app.upload(&bytes).await;
    let (second, second_job) = app.upload(&bytes).await;
    assert_ne!(first, second);
    for (document, job) in [(first, first_job), (second, second_job)] {
        let job = app.job(job).await;
        assert_eq!(job.document_id, Some(document));
        assert!(
            job.current_event_id.is_some(),
            "each upload's job is announced"
        );
    }
}

/// Claims of tenant A's owner (a member, so that only the token's own fault can fail it).
fn claims(app: &TestApp, tenant: Uuid) -> Value {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let owner = quire_shared::auth::verify(&app.context.settings.auth, &app.token)
        .expect("the app's token")
        .sub;
    json!({
        "sub": owner, "tid": tenant,
        "iss": app.context.settings.auth.issuer, "aud": app.context.settings.auth.audience,
        "iat": now, "exp": now + 600,
    })
}

fn sign(claims: &Value, secret: &str) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).expect("key"),
    )
    .expect("sign")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_token_fault_answers_the_same_401() {
    let app = app().await;
    let secret = app.context.settings.auth.jwt_secret.expose().to_owned();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = claims(&app, app.tenant_id);
        change(&mut claims);
        sign(&claims, &secret)
    };
    let valid = sign(&claims(&app, app.tenant_id), &secret);
    let unsigned = {
        let parts: Vec<&str> = valid.split('.').collect();
        format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{}.", parts[1])
    };
    let headers: Vec<(&str, String)> = vec![
        ("alg none", format!("Bearer {unsigned}")),
        (
            "another key",
            format!(
                "Bearer {}",
                sign(
                    &claims(&app, app.tenant_id),
                    "another-secret-of-sufficient-length!!"
                )
            ),
        ),
        (
            "expired",
            format!(
                "Bearer {}",
                with(&|c| {
                    c["iat"] = json!(now - 7200);
                    c["exp"] = json!(now - 3600);
                })
            ),
        ),
        (
            "not yet valid",
            format!("Bearer {}", with(&|c| c["nbf"] = json!(now + 3600))),
        ),
        (
            "issued in the future",
            format!("Bearer {}", with(&|c| c["iat"] = json!(now + 3600))),
        ),
        (
            "wrong audience",
            format!("Bearer {}", with(&|c| c["aud"] = json!("someone-else"))),
        ),
        (
            "wrong issuer",
            format!("Bearer {}", with(&|c| c["iss"] = json!("someone-else"))),
        ),
        (
            "no expiry",
            format!(
                "Bearer {}",
                with(&|c| {
                    c.as_object_mut().expect("object").remove("exp");
                })
            ),
        ),
        (
            "unknown tenant",
            format!("Bearer {}", sign(&claims(&app, Uuid::now_v7()), &secret)),
        ),
        ("bare scheme", "Bearer".to_owned()),
        ("basic scheme", "Basic dXNlcjpwYXNz".to_owned()),
        ("two tokens", format!("Bearer {valid} {valid}")),
        ("garbage", "Bearer not.a.jwt".to_owned()),
        ("16 KB token", format!("Bearer {}", "A".repeat(16 * 1024))),
    ];
    let url = format!("{}/api/documents/{}", app.address, Uuid::now_v7());
    let mut bodies = Vec::new();
    for (case, header) in headers {
        let response = app
            .http
            .get(&url)
            .header("authorization", header)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 401, "{case}");
        let mut body = problem(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
        body.as_object_mut().expect("object").remove("request_id");
        bodies.push(body);
    }
    assert!(
        bodies.windows(2).all(|pair| pair[0] == pair[1]),
        "401 bodies differ"
    );
    // The valid token works, so the faults above were the tokens' own.
    let ok = app
        .http
        .get(&url)
        .bearer_auth(&valid)
        .send()
        .await
        .expect("request");
    assert_eq!(ok.status(), 404);
    assert_nothing_recorded(&app).await;
}

/// Method, path, extra headers, expected status and code.
type PathCase = (
    Method,
    String,
    Vec<(&'static str, &'static str)>,
    StatusCode,
    &'static str,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_methods_and_headers_get_problems() {
    let app = app().await;
    let cases: Vec<PathCase> = vec![
        (
            Method::GET,
            "/api/documents/not-a-uuid".into(),
            vec![],
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::GET,
            format!("/api/documents/{}", "9".repeat(10 * 1024)),
            vec![],
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::GET,
            "/api/documents/%00".into(),
            vec![],
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::GET,
            "/api/no-such-route".into(),
            vec![],
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::PUT,
            "/api/documents".into(),
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            Method::PATCH,
            format!("/api/documents/{}/restore", Uuid::now_v7()),
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            Method::GET,
            format!("/api/documents/{}", Uuid::now_v7()),
            vec![("accept", "text/html")],
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
        ),
        (
            Method::GET,
            format!("/api/documents/{}/processing-jobs/{}", Uuid::now_v7(), "x"),
            vec![],
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    for (method, path, headers, status, code) in cases {
        let mut request = app
            .http
            .request(method.clone(), format!("{}{path}", app.address))
            .bearer_auth(&app.token);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.expect("request");
        assert_eq!(
            response.status(),
            status,
            "{method} {}",
            &path[..path.len().min(80)]
        );
        problem(response, status, code).await;
    }
    assert_nothing_recorded(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_ids_from_query_headers_are_ignored() {
    let app = app().await;
    let (tenant_b, token_b) = app.add_tenant("tenant-b").await;
    let response = app
        .http
        .post(format!(
            "{}/api/documents?tenant_id={tenant_b}",
            app.address
        ))
        .bearer_auth(&app.token)
        .header("x-tenant-id", tenant_b.to_string())
        .multipart(file_form(
            b"whose document is this".to_vec(),
            "a.txt",
            "text/plain",
        ))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    let document_id = body["document"]["id"].as_str().expect("id").to_owned();
    // It is tenant A's (the token's), not B's.
    let theirs = app
        .get_as(&token_b, &format!("/api/documents/{document_id}"))
        .await;
    assert_eq!(theirs.status(), 404);
    let ours = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await;
    assert_eq!(ours.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_longer_than_its_declared_length_stores_nothing() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = app().await;
    let (content_type, body) = raw_multipart(&vec![b'a'; (LIMIT * 2) as usize]);
    let address = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    // Declares 100 bytes, sends far more: the server reads 100 and never stores the rest.
    let head = format!(
        "POST /api/documents HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: {content_type}\r\nContent-Length: 100\r\nConnection: close\r\n\r\n",
        app.token
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let _ = stream.write_all(&body).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert_nothing_recorded(&app).await;
}
