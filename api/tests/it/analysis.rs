//! The analyze pipeline on real files, end to end: a PDF with a text layer, a scanned
//! page and a plain-text note each become READY with a thumbnail, text and the right
//! issue date, and are found by a word from them; hostile files end FAILED with a stable
//! code and the next job still runs.

use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::fixtures;
use crate::helpers::{TestApp, uuid_at};
use quire_shared::states::JobStatus;

async fn upload(app: &TestApp, bytes: Vec<u8>, filename: &str) -> (Uuid, Uuid) {
    let response = app.upload_as(&app.token, bytes, filename).await;
    assert_eq!(response.status(), 201, "{filename}");
    let body: Value = response.json().await.expect("json");
    (uuid_at(&body, "/document/id"), uuid_at(&body, "/job/id"))
}

async fn document(app: &TestApp, id: Uuid) -> Value {
    app.json_as(
        Method::GET,
        &app.token,
        &format!("/api/documents/{id}"),
        None,
    )
    .await
    .1
}

async fn search(app: &TestApp, token: &str, q: &str) -> Vec<Value> {
    let (status, body) = app
        .json_as(
            Method::GET,
            token,
            &format!("/api/documents/search?q={q}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["documents"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_a_scan_and_a_note_become_ready_dated_and_findable() {
    let app = TestApp::spawn().await;
    let pdf = fixtures::text_pdf(&[
        "ACME Supplies GmbH",
        "Rechnung Nr. 4711",
        "Rechnungsdatum: 15.03.2024",
        "Zahlbar bis 14.04.2024",
        "One quokka plush toy, 19.99 EUR",
    ]);
    let scan = fixtures::scanned_page(&[
        "City Library",
        "London, 2 February 2023",
        "Dear reader, your wombat encyclopedia is overdue.",
    ]);
    let note = b"Note from 2021-07-09\nFeed the platypus twice a day.\n".to_vec();
    let (pdf_id, pdf_job) = upload(&app, pdf, "invoice.pdf").await;
    let (scan_id, scan_job) = upload(&app, scan, "scan.png").await;
    let (note_id, note_job) = upload(&app, note, "note.txt").await;
    // A date the user set is never overwritten by detection.
    let (status, _) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/documents/{note_id}"),
            Some(json!({ "issued_at": "2020-01-01" })),
        )
        .await;
    assert_eq!(status, 200);

    app.start_dispatcher();
    let _worker = app.start_worker();
    for job in [pdf_job, scan_job, note_job] {
        app.wait_for_job(job, JobStatus::Succeeded).await;
    }
    for (id, issued_at) in [
        (pdf_id, "2024-03-15"),
        (scan_id, "2023-02-02"),
        (note_id, "2020-01-01"),
    ] {
        let body = document(&app, id).await;
        assert_eq!(body["status"], "READY", "{body}");
        assert_eq!(body["issued_at"], issued_at, "{body}");
        let thumbnail = app
            .get_as(&app.token, &format!("/api/documents/{id}/thumbnail"))
            .await;
        assert_eq!(thumbnail.status(), 200);
        assert_eq!(
            thumbnail
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("image/png")
        );
        let (width, height) = fixtures::png_size(&thumbnail.bytes().await.expect("png"));
        assert!(width > 0 && width <= 400 && height > 0, "{width}x{height}");
    }

    for (word, expected) in [
        ("quokka", pdf_id),
        ("wombat", scan_id),
        ("platypus", note_id),
    ] {
        let hits = search(&app, &app.token, word).await;
        let ids: Vec<Uuid> = hits.iter().map(|hit| uuid_at(hit, "/id")).collect();
        assert_eq!(ids, [expected], "searching {word}");
        let snippet = hits[0]["search"]["snippet"].as_array().expect("snippet");
        assert!(
            snippet.iter().any(|part| part["match"] == true
                && part["text"]
                    .as_str()
                    .is_some_and(|t| t.to_lowercase().contains(word))),
            "{word}: {snippet:?}"
        );
    }
    // Tags are searchable as soon as they are set; other tenants find nothing.
    let (status, _) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/documents/{pdf_id}"),
            Some(json!({ "tags": ["supplier"] })),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(search(&app, &app.token, "supplier").await.len(), 1);
    let (_, other) = app.add_tenant("tenant-b").await;
    assert!(search(&app, &other, "quokka").await.is_empty());
    // The trash is never searched.
    let (status, _) = app
        .json_as(
            Method::DELETE,
            &app.token,
            &format!("/api/documents/{note_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert!(search(&app, &app.token, "platypus").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_pages_and_refuses_bad_queries() {
    let app = TestApp::spawn().await;
    let mut jobs = Vec::new();
    for i in 0..5 {
        let (_, job) = upload(
            &app,
            format!("meeting minutes number {i} about budgets").into_bytes(),
            "m.txt",
        )
        .await;
        jobs.push(job);
    }
    app.start_dispatcher();
    let _worker = app.start_worker();
    for job in jobs {
        app.wait_for_job(job, JobStatus::Succeeded).await;
    }
    let (_, first) = app
        .json_as(
            Method::GET,
            &app.token,
            "/api/documents/search?q=budgets&limit=3",
            None,
        )
        .await;
    assert_eq!(first["documents"].as_array().map(Vec::len), Some(3));
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, second) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/search?q=budgets&limit=3&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(second["documents"].as_array().map(Vec::len), Some(2));
    assert!(second["next_cursor"].is_null());
    for bad in ["", "%20", "budgets&tag=x", "budgets&cursor=abc"] {
        let (status, body) = app
            .json_as(
                Method::GET,
                &app.token,
                &format!("/api/documents/search?q={bad}"),
                None,
            )
            .await;
        assert_eq!(status, 400, "q={bad}: {body}");
    }
    // Query syntax never errors: operators and stray quotes are just words.
    let (status, _) = app
        .json_as(
            Method::GET,
            &app.token,
            "/api/documents/search?q=%22budgets%20or%20-%27%29%28",
            None,
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_files_fail_with_stable_codes_and_the_next_job_still_runs() {
    let app = TestApp::spawn().await;
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "encrypted",
            fixtures::encrypted_pdf(),
            "e.pdf",
            "pdf_encrypted",
        ),
        (
            "corrupt",
            fixtures::corrupt_pdf(),
            "c.pdf",
            "pdf_unreadable",
        ),
        // 16 streams of 128 MiB: two gigabytes once inflated, from a file of kilobytes.
        (
            "bomb",
            fixtures::bomb_pdf(16),
            "b.pdf",
            "pdf_decompression_bomb",
        ),
        (
            "huge image",
            fixtures::png_claiming(60_000, 60_000),
            "h.png",
            "image_too_large",
        ),
        (
            "empty image",
            fixtures::png_claiming(0, 0),
            "z.png",
            "image_unreadable",
        ),
    ];
    let mut uploaded = Vec::new();
    for (what, bytes, filename, code) in cases {
        let (document_id, job_id) = upload(&app, bytes, filename).await;
        uploaded.push((what, document_id, job_id, code));
    }
    app.start_dispatcher();
    let _worker = app.start_worker();
    for (what, document_id, job_id, code) in uploaded {
        let job = app.wait_for_job(job_id, JobStatus::Failed).await;
        assert_eq!(job.error_code.as_deref(), Some(code), "{what}");
        assert_eq!(
            job.attempts, 1,
            "{what}: the file's own fault is not retried"
        );
        let body = document(&app, document_id).await;
        assert_eq!(body["status"], "FAILED", "{what}: {body}");
        let error = body["processing_error"].as_str().unwrap_or_default();
        assert!(!error.is_empty() && !error.contains('/'), "{what}: {error}");
        let thumbnail = app
            .get_as(
                &app.token,
                &format!("/api/documents/{document_id}/thumbnail"),
            )
            .await;
        assert_eq!(thumbnail.status(), 409, "{what}");
    }
    let (_, job) = upload(&app, b"an ordinary note after the storm".to_vec(), "ok.txt").await;
    app.wait_for_job(job, JobStatus::Succeeded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_with_a_nul_past_the_sniffed_bytes_is_cleaned_and_becomes_ready() {
    let app = TestApp::spawn().await;
    // The upload sniffs the first 512 bytes; the NUL and an invalid sequence come later.
    let mut bytes = "Note about the echidna.\n".repeat(30).into_bytes();
    assert!(bytes.len() > 512);
    bytes.extend_from_slice(b"before\0after \xff\xfe the numbat\n");
    let (id, job) = upload(&app, bytes, "nul.txt").await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let job = app.wait_for_job(job, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1, "a file's fault is never retried");
    assert_eq!(document(&app, id).await["status"], "READY");
    let hits = search(&app, &app.token, "numbat").await;
    assert_eq!(hits.len(), 1);
    assert_eq!(uuid_at(&hits[0], "/id"), id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_error_fails_a_job_for_good_and_only_an_unreachable_database_is_transient() {
    use diesel::sql_types::Text;
    use diesel_async::RunQueryDsl;
    use quire_shared::db::DbError;
    use quire_shared::jobs::JobError;

    let app = TestApp::spawn().await;
    let mut conn = app.pool.get().await.expect("connection");
    // Class 22 errors of the real server: a NUL in text, text that is no integer, a
    // division by zero.
    let statements: [(&str, &str); 3] = [
        ("SELECT $1::text AS value", "before\0after"),
        ("SELECT $1::int4::text AS value", "twelve"),
        ("SELECT (1 / (length($1) - 1))::text AS value", "x"),
    ];
    for (sql, value) in statements {
        let error = diesel::sql_query(sql)
            .bind::<Text, _>(value)
            .execute(&mut conn)
            .await
            .expect_err(sql);
        let error = JobError::database(DbError::from(error));
        assert!(
            matches!(error, JobError::Permanent { .. }),
            "{sql}: {error:?}"
        );
        assert_eq!(error.code(), "invalid_data", "{sql}");
    }
    drop(conn);

    // A database that does not answer is worth another attempt.
    let mut settings = app.context.settings.database.clone();
    settings.url = quire_shared::secret::Secret::new("postgres://quire@127.0.0.1:1/quire");
    settings.connect_timeout_seconds = 1;
    let unreachable = quire_shared::db::build_pool(&settings).expect("pool");
    let error = JobError::database(DbError::from(
        unreachable
            .get()
            .await
            .err()
            .expect("port 1 answers nothing"),
    ));
    assert!(matches!(error, JobError::Transient { .. }), "{error:?}");
    assert_eq!(error.code(), "database_unavailable");
}

/// `text` encoded as UTF-16 with its byte order mark, little- or big-endian.
fn utf16_with_bom(text: &str, little_endian: bool) -> Vec<u8> {
    let mut bytes = if little_endian {
        vec![0xFF, 0xFE]
    } else {
        vec![0xFE, 0xFF]
    };
    for unit in text.encode_utf16() {
        let pair = if little_endian {
            unit.to_le_bytes()
        } else {
            unit.to_be_bytes()
        };
        bytes.extend_from_slice(&pair);
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn texts_in_latin_1_windows_1252_and_utf_16_are_ordinary_documents() {
    let app = TestApp::spawn().await;
    // Windows-1252: "€" is 0x80 and the curly quotes 0x93/0x94, which Latin-1 lacks.
    let mut cp1252 = b"Sehr geehrte Frau M\xfcller,\r\nGr\xfc\xdfe aus dem caf\xe9 am 12. M\xe4rz 2024: \x93Rechnung\x94 \x80 12,50. Wombat.\r\n".to_vec();
    // Latin-1 holds no byte in 0x80..=0x9F: the same letters, its own words.
    let mut latin1 =
        b"Ch\xe8re Am\xe9lie, un caf\xe9 cr\xe8me co\xfbte 3 \xa3 \xe0 No\xebl. Quokka.\n".to_vec();
    // Past the sniffed 512 bytes too: the whole file is decoded, not its first bytes.
    cp1252.extend_from_slice(&b"Zeile ohne Umlaute.\r\n".repeat(30));
    cp1252.extend_from_slice(b"Schlu\xdf: Numbat.\r\n");
    latin1.extend_from_slice(&b"ligne suivante.\n".repeat(40));
    let utf16le = utf16_with_bom("Grüße, café, 12. März 2024. Bilby.\n", true);
    let utf16be = utf16_with_bom("Grüße, café, 12. März 2024. Dugong.\n", false);
    let cases = [
        (
            "cp1252.txt",
            cp1252,
            "text/plain; charset=windows-1252",
            "numbat",
        ),
        (
            "latin1.txt",
            latin1,
            "text/plain; charset=windows-1252",
            "quokka",
        ),
        ("le.txt", utf16le, "text/plain; charset=utf-16le", "bilby"),
        ("be.txt", utf16be, "text/plain; charset=utf-16be", "dugong"),
    ];
    let mut uploaded = Vec::new();
    for (filename, bytes, content_type, word) in cases {
        let (id, job) = upload(&app, bytes.clone(), filename).await;
        uploaded.push((filename, id, job, bytes, content_type, word));
    }
    app.start_dispatcher();
    let _worker = app.start_worker();
    for (filename, id, job, bytes, content_type, word) in &uploaded {
        let job = app.wait_for_job(*job, JobStatus::Succeeded).await;
        assert_eq!(job.attempts, 1, "{filename}");
        let view = document(&app, *id).await;
        assert_eq!(view["status"], "READY", "{filename}: {view}");
        assert_eq!(
            view["current_version"]["content_type"], *content_type,
            "{filename}"
        );
        let hits = search(&app, &app.token, word).await;
        assert_eq!(hits.len(), 1, "{filename}: {word}");
        assert_eq!(uuid_at(&hits[0], "/id"), *id, "{filename}");

        let download = app
            .http
            .get(format!("{}/api/documents/{id}/content", app.address))
            .bearer_auth(&app.token)
            .header("accept", "*/*")
            .send()
            .await
            .expect("download");
        assert_eq!(download.status(), 200, "{filename}");
        assert_eq!(download.headers()["content-type"], *content_type);
        let original = download.bytes().await.expect("body");
        assert_eq!(&original[..], &bytes[..], "{filename}: the original bytes");
    }
    // The accented words are found as UTF-8 text in every one of them.
    let mut found: Vec<Uuid> = search(&app, &app.token, "caf%C3%A9")
        .await
        .iter()
        .map(|hit| uuid_at(hit, "/id"))
        .collect();
    let mut expected: Vec<Uuid> = uploaded.iter().map(|(_, id, ..)| *id).collect();
    found.sort();
    expected.sort();
    assert_eq!(found, expected);
    assert_eq!(search(&app, &app.token, "Gr%C3%BC%C3%9Fe").await.len(), 3);
}
