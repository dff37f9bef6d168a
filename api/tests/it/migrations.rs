use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use quire_shared::db::migrate;
use quire_shared::test_support::TestDatabase;

#[derive(QueryableByName)]
struct Unindexed {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    constraint_name: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_down_and_up_again() {
    let database = TestDatabase::create().await;
    let reverted = migrate::revert_all(&database.url).await.expect("down");
    assert!(reverted >= 1);
    let applied = migrate::run_pending(&database.url).await.expect("up");
    assert_eq!(applied.len(), reverted);
    let mut conn = AsyncPgConnection::establish(&database.url)
        .await
        .expect("connect");
    assert!(migrate::is_current(&mut conn).await.expect("check"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_foreign_key_has_an_index() {
    let database = TestDatabase::create().await;
    let mut conn = AsyncPgConnection::establish(&database.url)
        .await
        .expect("connect");
    // Every foreign key of the schema is on one column: it must lead some index.
    let unindexed: Vec<Unindexed> = diesel::sql_query(
        "SELECT c.conrelid::regclass::text AS table_name, c.conname::text AS constraint_name \
         FROM pg_constraint c \
         WHERE c.contype = 'f' AND NOT EXISTS ( \
             SELECT 1 FROM pg_index i \
             WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])",
    )
    .load(&mut conn)
    .await
    .expect("query");
    let names: Vec<String> = unindexed
        .iter()
        .map(|row| format!("{}.{}", row.table_name, row.constraint_name))
        .collect();
    assert!(names.is_empty(), "foreign keys without an index: {names:?}");
}
