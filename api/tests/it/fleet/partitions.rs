//! The fleet across hosts, and the network failing under it: a worker host cut off
//! mid-run and plugged back in, then the storage network gone for 10 s during uploads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quire_shared::test_support::eventually;

use super::checks;
use super::stack::{Fleet, HOST_1};
use super::uploads::{self, Answer, Uploader};

const DOCUMENTS: usize = 1_000;
/// Upload clients at once.
const CLIENTS: usize = 8;
/// Upload clients while storage goes away.
const STORAGE_CLIENTS: usize = 4;
const OUTAGE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_four_hosts_loses_nothing_when_a_worker_host_or_the_storage_network_is_cut() {
    let _serial = crate::faults::one_at_a_time().await;
    let began = Instant::now();
    let mut fleet = Fleet::new().await;
    fleet.start_all().await;
    let set_up = began.elapsed();
    let pool = fleet.pool.clone();
    let tenant = fleet.tenant_id;
    let worker_1 = fleet.worker_id("worker-1").await;
    let uploader = Uploader::new(&fleet.api_url, &fleet.token);
    let clients = uploader.spawn(CLIENTS, 0, DOCUMENTS, Arc::new(AtomicBool::new(false)));

    // Host 1 loses its link while its worker runs jobs and work remains. What it holds is
    // read after the cut: a job it finished just before is not one it lost. Should it
    // have held nothing by then, the cable goes back in and the cut comes again.
    let host_1 = fleet.addresses[HOST_1];
    let mut cuts = 0;
    let (held, cut) = loop {
        eventually(Duration::from_secs(60), "worker-1 runs jobs", || async {
            (!checks::running_on(&pool, &worker_1).await.is_empty()).then_some(())
        })
        .await;
        fleet.net.link_down(host_1);
        let cut = Instant::now();
        cuts += 1;
        let held = checks::running_on(&pool, &worker_1).await;
        if !held.is_empty() {
            break (held, cut);
        }
        assert!(
            cuts < 10,
            "worker-1 never held a job when its link went down"
        );
        fleet.net.link_up(host_1);
    };
    let ready_at_cut = checks::ready(&pool, tenant).await;
    assert!(
        ready_at_cut < DOCUMENTS as i64,
        "the cut came after the run"
    );

    // Host 2 carries on alone: its rescuer takes back what host 1 held once their leases
    // expire (they queue again, behind the backlog, and the end of the run sees them
    // done exactly once), and its worker goes on. Then the cable goes back in.
    let held_ids: Vec<_> = held.iter().map(|job| job.id).collect();
    // A bound for a broken build, not a speed: the leases (3 s) expire at once, but a
    // cut-off session's open transaction holds its locks until the server ends it
    // (`database.idle_in_transaction_timeout_ms`, 15 s in tests), on a loaded machine.
    eventually(
        Duration::from_secs(120),
        "host 2 took host 1's jobs back and went on",
        || async {
            let still_held = checks::running_on(&pool, &worker_1)
                .await
                .iter()
                .any(|job| held_ids.contains(&job.id));
            let more = checks::ready(&pool, tenant).await >= ready_at_cut + 20;
            (!still_held && more).then_some(())
        },
    )
    .await;
    fleet.net.link_up(host_1);
    let down_for = cut.elapsed();

    let answers = uploads::answers(clients).await;
    let refused = uploads::not_created(&answers);
    assert!(refused.is_empty(), "uploads not created: {refused:?}");
    assert_eq!(uploads::created(&answers).len(), DOCUMENTS);

    eventually(
        Duration::from_secs(300),
        "every document is READY",
        || async { (checks::ready(&pool, tenant).await == DOCUMENTS as i64).then_some(()) },
    )
    .await;
    let not_once = checks::not_ready_once(&pool, tenant).await;
    assert!(not_once.is_empty(), "not READY exactly once: {not_once:?}");
    assert_eq!(checks::documents(&pool, tenant).await, DOCUMENTS as i64);
    // Host 1's processes lived through the cut.
    fleet.assert_alive();
    let first_phase = began.elapsed();

    // The storage network goes for 10 s while clients keep uploading.
    let stop = Arc::new(AtomicBool::new(false));
    let clients = uploader.spawn(STORAGE_CLIENTS, DOCUMENTS, usize::MAX, Arc::clone(&stop));
    let before_outage = DOCUMENTS as i64 + 20;
    eventually(Duration::from_secs(60), "uploads go on", || async {
        (checks::documents(&pool, tenant).await >= before_outage).then_some(())
    })
    .await;
    let storage = fleet.seaweed.address;
    fleet.net.link_down(storage);
    // The outage is a span of time, not a condition: 10 s, as an operator would see it;
    // and it lasts until an upload has met it (each gives up on storage within seconds),
    // so a slow machine cannot make the outage pass unseen.
    tokio::time::sleep(OUTAGE).await;
    let met_at = began.elapsed();
    eventually(
        Duration::from_secs(60),
        "an upload meets the outage (503)",
        || async { (uploader.unavailable() > 0).then_some(()) },
    )
    .await;
    let outage_extended_by = began.elapsed().saturating_sub(met_at);
    fleet.net.link_up(storage);
    let after_outage = checks::documents(&pool, tenant).await + 20;
    eventually(
        Duration::from_secs(60),
        "uploads are accepted again",
        || async { (checks::documents(&pool, tenant).await >= after_outage).then_some(()) },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let outage_answers = uploads::answers(clients).await;
    let unexpected = uploads::unexpected(&outage_answers);
    assert!(
        unexpected.is_empty(),
        "neither created nor 503: {unexpected:?}"
    );
    let unavailable = outage_answers
        .iter()
        .filter(|answer| matches!(answer, Answer::Unavailable(_)))
        .count();
    assert!(unavailable > 0, "no upload met the outage");
    let created = uploads::created(&answers).len() + uploads::created(&outage_answers).len();

    // Jobs that met the outage retried and finished: nothing lost, nothing twice.
    eventually(
        Duration::from_secs(120),
        "every document is READY",
        || async { (checks::ready(&pool, tenant).await == created as i64).then_some(()) },
    )
    .await;
    let not_once = checks::not_ready_once(&pool, tenant).await;
    assert!(not_once.is_empty(), "not READY exactly once: {not_once:?}");
    // A 503 recorded nothing; a 201 recorded its document.
    assert_eq!(checks::documents(&pool, tenant).await, created as i64);
    // Nothing half: every row's object is there, whole; what no row names is storage
    // GC's, and is only what a failed upload or a superseded run could leave.
    let store = fleet.store();
    let halves = checks::halves(&pool, store.as_ref()).await;
    assert!(
        halves.rows_without_objects.is_empty() && halves.unexplained.is_empty(),
        "{halves:?}"
    );
    assert!(
        halves.unnamed_sources.len() <= unavailable,
        "more unnamed uploads than failed uploads ({unavailable}): {halves:?}"
    );
    fleet.assert_alive();
    println!(
        "fleet: set up in {set_up:?}; host 1 cut ({cuts} tries) for {down_for:?} holding {} jobs, \
         {DOCUMENTS} documents READY after {first_phase:?}; storage cut for {OUTAGE:?} \
         (+{outage_extended_by:?} until an upload met it): {} uploads, {unavailable} answered 503, {} unnamed uploads and {} superseded \
         assets left for GC; {created} documents READY after {:?}",
        held.len(),
        outage_answers.len(),
        halves.unnamed_sources.len(),
        halves.superseded_assets.len(),
        began.elapsed()
    );
}
