//! The message shape exists once: `EventMessage` in the Redis protocol. SQL builds the
//! same message for the events that replace another (`quire_event_message`, used by
//! retries, the rescuer and lost-message recovery); these tests hold the two together.

use diesel::sql_types::{Jsonb, Nullable, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_shared::broker::EventMessage;
use quire_shared::db::outbox;
use serde_json::Value;
use uuid::Uuid;

use crate::support::{JOB_TYPE, World};

#[derive(diesel::QueryableByName)]
struct Built {
    #[diesel(sql_type = Jsonb)]
    message: Value,
}

/// What `quire_event_message` answers for these ids.
async fn sql_message(
    world: &World,
    event_id: Uuid,
    job_id: Uuid,
    previous_event_id: Option<Uuid>,
) -> Value {
    let mut conn = world.pool.get().await.expect("connection");
    diesel::sql_query("SELECT quire_event_message($1, $2, $3, $4, $5) AS message")
        .bind::<SqlUuid, _>(event_id)
        .bind::<SqlUuid, _>(job_id)
        .bind::<SqlUuid, _>(world.tenant_id)
        .bind::<Text, _>(JOB_TYPE)
        .bind::<Nullable<SqlUuid>, _>(previous_event_id)
        .get_result::<Built>(&mut conn)
        .await
        .expect("quire_event_message")
        .message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_function_builds_exactly_the_message_rust_stores_at_enqueue() {
    let world = World::new().await;
    let enqueued = world.enqueue().await;
    let stored = {
        let mut conn = world.pool.get().await.expect("connection");
        outbox::event_message(&mut conn, enqueued.event_id)
            .await
            .expect("stored message")
    };
    assert!(
        stored.get("request_id").is_some(),
        "the enqueued message carries a request id: {stored}"
    );

    // The same ids, the request id taken from the event itself.
    let built = sql_message(
        &world,
        enqueued.event_id,
        enqueued.job_id,
        Some(enqueued.event_id),
    )
    .await;

    assert_eq!(built, stored);
    let parsed: EventMessage = serde_json::from_value(built).expect("an EventMessage");
    assert_eq!(serde_json::to_value(&parsed).expect("serialize"), stored);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_request_id_the_sql_message_is_the_rust_message_without_one() {
    let world = World::new().await;
    let (event_id, job_id) = (Uuid::now_v7(), Uuid::now_v7());

    let built = sql_message(&world, event_id, job_id, None).await;

    let rust = EventMessage::new(event_id, job_id, world.tenant_id, JOB_TYPE);
    assert_eq!(built, serde_json::to_value(&rust).expect("serialize"));
}
