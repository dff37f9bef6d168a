use quire_api::routes::{ApiDoc, DOCUMENTATION_ROUTES, ROUTES};
use utoipa::OpenApi;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_openapi_document_parses_and_names_every_route() {
    let app = TestApp::spawn().await;
    let served = app
        .http
        .get(format!("{}/api/openapi.json", app.address))
        .send()
        .await
        .expect("request");
    assert_eq!(served.status(), 200, "the document needs no token");
    let text = served.text().await.expect("body");
    let spec = oas3::from_json(&text).expect("a valid OpenAPI document");
    assert!(spec.openapi.starts_with("3.1"), "{}", spec.openapi);
    let paths = spec.paths.expect("paths");

    for (method, path) in ROUTES {
        if DOCUMENTATION_ROUTES.contains(path) {
            continue;
        }
        let item = paths
            .get(*path)
            .unwrap_or_else(|| panic!("{path} is missing from the OpenAPI document"));
        let operation = match *method {
            "get" => &item.get,
            "post" => &item.post,
            "patch" => &item.patch,
            "delete" => &item.delete,
            "put" => &item.put,
            other => panic!("unexpected method {other}"),
        };
        assert!(
            operation.is_some(),
            "{method} {path} is missing from the OpenAPI document"
        );
    }
    // And nothing documented that is not served.
    let documented: usize = paths
        .values()
        .map(|item| {
            [&item.get, &item.post, &item.patch, &item.delete, &item.put]
                .iter()
                .filter(|op| op.is_some())
                .count()
        })
        .sum();
    assert_eq!(documented, ROUTES.len() - DOCUMENTATION_ROUTES.len());
    // Links and generated clients name operations by id: each is set, and unique.
    let mut ids = std::collections::BTreeSet::new();
    for (path, item) in &paths {
        for operation in [&item.get, &item.post, &item.patch, &item.delete, &item.put]
            .into_iter()
            .flatten()
        {
            let id = operation
                .operation_id
                .clone()
                .unwrap_or_else(|| panic!("an operation of {path} has no operation_id"));
            assert!(ids.insert(id.clone()), "operation_id {id} is used twice");
        }
    }
    assert_eq!(ApiDoc::openapi().paths.paths.len(), paths.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swagger_ui_is_served_from_vendored_assets() {
    let app = TestApp::spawn().await;
    let page = app
        .http
        .get(format!("{}/api/docs", app.address))
        .header("accept", "text/html")
        .send()
        .await
        .expect("request");
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let html = page.text().await.expect("html");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing from a CDN"
    );
    for asset in [
        "/api/docs/swagger-ui-bundle.js",
        "/api/docs/swagger-ui.css",
        "/api/docs/init.js",
    ] {
        assert!(html.contains(asset));
        let response = app
            .http
            .get(format!("{}{asset}", app.address))
            .send()
            .await
            .expect("asset");
        assert_eq!(response.status(), 200, "{asset}");
        assert!(!response.bytes().await.expect("bytes").is_empty());
    }
}
