use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use quire_shared::db::migrate;
use quire_shared::test_support::TestDatabase;

/// One thing a catalogue check found wrong with the migrated schema, named by its query.
#[derive(QueryableByName)]
struct Finding {
    #[diesel(sql_type = Text)]
    finding: String,
}

/// The findings of `sql` (one `finding` text column) on a freshly migrated schema.
async fn findings(sql: &str) -> Vec<String> {
    let database = TestDatabase::create().await;
    let mut conn = AsyncPgConnection::establish(&database.url)
        .await
        .expect("connect");
    let found: Vec<Finding> = diesel::sql_query(sql).load(&mut conn).await.expect("query");
    found.into_iter().map(|row| row.finding).collect()
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
    // Every foreign key of the schema is on one column: it must lead some index.
    let unindexed = findings(
        "SELECT c.conrelid::regclass::text || '.' || c.conname::text AS finding \
         FROM pg_constraint c \
         WHERE c.contype = 'f' AND NOT EXISTS ( \
             SELECT 1 FROM pg_index i \
             WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])",
    )
    .await;
    assert!(
        unindexed.is_empty(),
        "foreign keys without an index: {unindexed:?}"
    );
}

/// Every index entry costs each write of its row (an upload writes some twenty), so no
/// plain index may be one that another already is: a non-unique index on every row whose
/// key columns lead another such index of the same table, of the same kind, serves no
/// lookup the other does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_index_is_the_leading_part_of_another() {
    let redundant = findings(
        "SELECT a.indexrelid::regclass::text || ' (covered by ' \
                || b.indexrelid::regclass::text || ')' AS finding \
         FROM pg_index a \
         JOIN pg_class ac ON ac.oid = a.indexrelid \
         JOIN pg_namespace n ON n.oid = ac.relnamespace AND n.nspname = current_schema() \
         JOIN pg_index b ON b.indrelid = a.indrelid AND b.indexrelid <> a.indexrelid \
         JOIN pg_class bc ON bc.oid = b.indexrelid \
         WHERE NOT a.indisunique AND a.indpred IS NULL AND a.indexprs IS NULL \
           AND b.indpred IS NULL AND b.indexprs IS NULL AND ac.relam = bc.relam \
           AND a.indnkeyatts <= b.indnkeyatts \
           AND (a.indkey::int2[])[0:a.indnkeyatts - 1] = (b.indkey::int2[])[0:a.indnkeyatts - 1] \
           AND (a.indclass::oid[])[0:a.indnkeyatts - 1] = (b.indclass::oid[])[0:a.indnkeyatts - 1] \
           AND (a.indcollation::oid[])[0:a.indnkeyatts - 1] \
               = (b.indcollation::oid[])[0:a.indnkeyatts - 1] \
         ORDER BY 1",
    )
    .await;
    assert!(redundant.is_empty(), "redundant indexes: {redundant:?}");
}
