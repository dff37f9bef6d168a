//! A database per test, cloned from a template migrated once per schema version.

use std::path::Path;

use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::required_env;
use crate::db::migrate;

pub struct TestDatabase {
    pub name: String,
    pub url: String,
}

#[derive(diesel::QueryableByName)]
struct Exists {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    exists: bool,
}

impl TestDatabase {
    /// Creates `quire_test_<uuid>` from the migrated template, building the template first
    /// if no process has yet (an advisory lock serialises that across test processes).
    pub async fn create() -> Self {
        Self::create_on(&required_env("QUIRE_TEST_DATABASE_URL")).await
    }

    /// The same on another server (a private one for fault tests), given a superuser URL
    /// of its maintenance database.
    pub async fn create_on(admin_url: &str) -> Self {
        let admin_url = admin_url.to_owned();
        let template = template_name();
        let mut admin = crate::db::connect(&admin_url)
            .await
            .expect("connect to the test PostgreSQL (is scripts/test running it?)");
        ensure_template(&mut admin, &admin_url, &template).await;
        let name = format!("quire_test_{}", Uuid::new_v4().simple());
        diesel::sql_query(format!("CREATE DATABASE {name} TEMPLATE {template}"))
            .execute(&mut admin)
            .await
            .expect("clone the template database");
        Self {
            url: database_url(&admin_url, &name),
            name,
        }
    }
}

async fn ensure_template(admin: &mut AsyncPgConnection, admin_url: &str, template: &str) {
    diesel::sql_query("SELECT pg_advisory_lock(4242001)")
        .execute(admin)
        .await
        .expect("take the template lock");
    let exists =
        diesel::sql_query("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS exists")
            .bind::<Text, _>(template)
            .get_result::<Exists>(admin)
            .await
            .expect("look for the template")
            .exists;
    if !exists {
        let building = format!("{template}_building");
        diesel::sql_query(format!("DROP DATABASE IF EXISTS {building}"))
            .execute(admin)
            .await
            .expect("drop a half-built template");
        diesel::sql_query(format!("CREATE DATABASE {building}"))
            .execute(admin)
            .await
            .expect("create the template");
        migrate::run_pending(&database_url(admin_url, &building))
            .await
            .expect("migrate the template");
        // The rename publishes the template whole: no test ever clones a half-migrated one.
        diesel::sql_query(format!("ALTER DATABASE {building} RENAME TO {template}"))
            .execute(admin)
            .await
            .expect("publish the template");
    }
    diesel::sql_query("SELECT pg_advisory_unlock(4242001)")
        .execute(admin)
        .await
        .expect("release the template lock");
}

/// `quire_tpl_<hash of every migration file>`: a changed migration builds a new template.
fn template_name() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut files: Vec<_> = walk(&dir);
    files.sort();
    let mut hasher = Sha256::new();
    for file in files {
        hasher.update(file.to_string_lossy().as_bytes());
        hasher.update(std::fs::read(&file).expect("read a migration"));
    }
    format!("quire_tpl_{}", &hex::encode(hasher.finalize())[..16])
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the migrations folder") {
        let path = entry.expect("read a migrations entry").path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else if path.extension().is_some_and(|ext| ext == "sql") {
            found.push(path);
        }
    }
    found
}

/// `admin_url` with its database name replaced.
pub(crate) fn database_url(admin_url: &str, database: &str) -> String {
    let (base, query) = admin_url
        .split_once('?')
        .map_or((admin_url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(head, _)| head);
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}
