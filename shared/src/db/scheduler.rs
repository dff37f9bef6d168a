//! The scheduler's statements (docs/decisions.md, "Fair share"): what it reads before a
//! round and the claim of its plan (`scheduling::plan`). None of them grows with the
//! backlog: the tenants with due events are found by skipping along
//! `outbox_events_fair_idx` from one (queue, class, tenant) to the next, each one's due
//! events are counted only up to the round's largest budget, and the occupancy comes
//! from the partial indexes of running and in-flight jobs, which hold at most the
//! fleet's slots and the per-queue bounds.
//!
//! A round runs in one transaction holding [`SCHEDULER_LOCK`]: dispatchers plan one at a
//! time, each on what the last one claimed (claimed events count as in flight), so the
//! per-queue bound and the running caps hold with any number of dispatchers.

use diesel::prelude::*;
use diesel::sql_types::{Array, Int8, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, RunQueryDsl, TransactionManager};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::moved;
use super::outbox::ClaimedEvent;
use super::prepared::Prepared;
use super::workers::LIVE_WITHIN_SECONDS;
use crate::scheduling::{self, Candidate, Limits, Occupancy, Pick, Priority, State};

/// The advisory lock (transaction-scoped) a scheduling round holds.
pub const SCHEDULER_LOCK: i64 = 0x5155_4952_4553_4348; // "QUIRESCH"

/// Opens a round's transaction and waits for the scheduling lock, in ONE round trip:
/// `BEGIN`, the lock and the round's settings go as one simple query (they carry no
/// parameters), where a transaction, then a lock statement, cost two round trips on the
/// path of every publish (issue 19). The statements run in order, so the round's first
/// read takes its snapshot after the lock is held and sees every claim the last round
/// committed.
///
/// The round also turns bitmap scans off. It counts the events in `PUBLISHING` and the
/// jobs `RUNNING` over partial indexes whose entries die by the thousand while a backlog
/// drains (every event passes through `PUBLISHING`). A plain index scan marks each dead
/// entry it meets (`kill_prior_tuple`) and skips it from then on; a bitmap scan, which
/// the planner picks for these counts, visits every dead entry's heap page again on
/// every round until autovacuum comes. With 20,000 events drained it read 2,400 pages
/// for no row: 5 ms of a 6.5 ms read, the largest cost of a round (auto_explain over the
/// fairness bench). The round's statements look rows up by key or along these indexes,
/// so none needs a bitmap.
///
/// Nor a sequential scan, which the round turns off too. A session plans each statement
/// once and keeps the plan (a generic one after the first few runs), and the first
/// rounds of a new installation plan on nearly empty tables, where reading a table whole
/// is the cheapest way. The round's read of the jobs in flight then read the delivered
/// partition of `outbox_events` whole once per job in flight on every round, as it
/// filled, until autovacuum's first ANALYZE made PostgreSQL plan again (5,306 sequential
/// scans in a bench of 10,000 jobs; `plans::plans_made_before_any_event_was_delivered_
/// still_go_by_key_beside_a_history`). Every table the round reads has the index it
/// needs, so the plans are the same ones at any size.
pub async fn begin_round(conn: &mut AsyncPgConnection) -> Result<(), DbError> {
    static BEGIN_ROUND: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "BEGIN; SELECT pg_advisory_xact_lock({SCHEDULER_LOCK}); \
             SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off"
        )
    });
    AnsiTransactionManager::begin_transaction_sql(conn, &BEGIN_ROUND).await?;
    Ok(())
}

/// Commits a round [`open_round`] left open: its claims, and the scheduling lock's
/// release.
pub async fn commit_round(conn: &mut AsyncPgConnection) -> Result<(), DbError> {
    AnsiTransactionManager::commit_transaction(conn).await?;
    Ok(())
}

/// Ends a round without its claims (they return to `PENDING` as if never made).
pub async fn rollback_round(conn: &mut AsyncPgConnection) -> Result<(), DbError> {
    AnsiTransactionManager::rollback_transaction(conn).await?;
    Ok(())
}

/// One row of [`read_state`]: a live-slots row, an occupancy row or a candidate,
/// told apart by `kind`; the columns another kind has no use for are NULL.
#[derive(QueryableByName)]
struct StateRow {
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    tenant_id: Option<Uuid>,
    /// slots: the live slots; occupancy: running; candidate: due.
    #[diesel(sql_type = Int8)]
    first: i64,
    /// occupancy: in flight; candidate: weight.
    #[diesel(sql_type = Int8)]
    second: i64,
    /// occupancy: bulk in flight; candidate: cap.
    #[diesel(sql_type = Int8)]
    third: i64,
    #[diesel(sql_type = Nullable<Text>)]
    priority: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    head_due_at: Option<OffsetDateTime>,
}

/// The job types that run only in a worker's analysis slots, read once: every round
/// binds them.
static ANALYSIS_QUEUES: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(crate::jobs::analysis_slot_types);

/// Everything a round plans on, in ONE statement (one round trip, one plan kept per
/// connection; three statements cost 0.2 ms of planning and two round trips more on
/// every publish, issue 19):
/// - the slots of the live workers serving each queue (the `workers` table): for a queue
///   whose jobs need an analysis slot, their analysis slots (a worker pops no more of
///   those, docs/decisions.md "Slots and analysis slots");
/// - running and in-flight jobs per queue and tenant. In flight: published and not yet
///   claimed (`QUEUED`, its current event announced), or being published right now
///   (`PUBLISHING`, its job not yet claimed: `publishing_in_flight`). A held job (its
///   tenant or queue paused) is not in flight even when announced: a worker's claim
///   refuses its message, and the resume announces it anew, so counting it would keep
///   the queue's places from everyone else until the resume;
/// - every (queue, class, tenant) with events due now, leaving out paused tenants and
///   paused queues: its due events counted only as far as a round could take them (the
///   most live slots of a queue or `in_flight_per_queue`, at most `batch_size`), its
///   oldest head, the tenant's weight and cap (`default_cap` unless the tenant sets its
///   own). A tenant row that is gone (a removed tenant's last jobs) is not paused, of
///   weight 1.
pub async fn read_state(
    conn: &mut AsyncPgConnection,
    limits: &Limits,
    default_cap: i64,
) -> Result<State, DbError> {
    let rows = diesel::sql_query(concat!(
        "WITH RECURSIVE live AS ( \
             SELECT q AS queue, sum(CASE WHEN q = ANY($5) \
                 THEN LEAST(w.slots, COALESCE(w.analysis_slots, w.slots)) \
                 ELSE w.slots END)::int8 AS slots \
             FROM workers AS w, unnest(w.queues) AS q \
             WHERE w.last_seen_at > now() - $1 * interval '1 second' \
             GROUP BY 1), \
         lookahead AS ( \
             SELECT LEAST(GREATEST(COALESCE(max(slots), 0), $2), $3) AS n FROM live), \
         occupancy AS ( \
             SELECT queue, tenant_id, sum(running)::int8 AS running, \
                    sum(in_flight)::int8 AS in_flight, sum(bulk_in_flight)::int8 AS bulk_in_flight \
             FROM ( \
                 SELECT job_type AS queue, tenant_id, count(*) AS running, 0 AS in_flight, \
                        0 AS bulk_in_flight \
                 FROM processing_jobs WHERE status = 'RUNNING' GROUP BY 1, 2 \
                 UNION ALL \
                 SELECT j.job_type, j.tenant_id, 0, count(*), \
                        count(*) FILTER (WHERE e.priority = 'bulk') \
                 FROM processing_jobs AS j JOIN outbox_events AS e ON e.id = j.current_event_id \
                 WHERE j.status = 'QUEUED' AND j.announced_event_id = j.current_event_id \
                   AND NOT EXISTS (SELECT 1 FROM queue_pauses AS p WHERE p.queue = j.job_type) \
                   AND NOT EXISTS (SELECT 1 FROM tenants AS t \
                                   WHERE t.id = j.tenant_id AND t.processing_paused_at IS NOT NULL) \
                 GROUP BY 1, 2 \
                 UNION ALL \
                 SELECT queue, tenant_id, 0, count(*), count(*) FILTER (WHERE priority = 'bulk') \
                 FROM ",
        publishing_in_flight!(),
        " AS p GROUP BY 1, 2) AS o \
             GROUP BY 1, 2), \
         ",
        pending_heads!(),
        ", \
         candidates AS ( \
             SELECT h.queue, h.priority, h.tenant_id, d.due, d.head_due_at, \
                    COALESCE(t.share_weight, 1)::int8 AS weight, \
                    COALESCE(t.max_running_jobs::int8, $4) AS cap \
             FROM heads AS h \
             CROSS JOIN LATERAL ( \
                 SELECT count(*) AS due, min(s.next_attempt_at) AS head_due_at FROM ( \
                     SELECT e.next_attempt_at FROM outbox_events AS e \
                     WHERE e.status = 'PENDING' AND e.queue = h.queue \
                       AND e.priority = h.priority AND e.tenant_id = h.tenant_id \
                       AND e.next_attempt_at <= now() \
                     ORDER BY e.next_attempt_at LIMIT (SELECT n FROM lookahead)) AS s) AS d \
             LEFT JOIN tenants AS t ON t.id = h.tenant_id \
             WHERE d.due > 0 AND t.processing_paused_at IS NULL \
               AND NOT EXISTS (SELECT 1 FROM queue_pauses AS p WHERE p.queue = h.queue)) \
         SELECT 'slots' AS kind, queue, NULL::uuid AS tenant_id, slots AS first, \
                0::int8 AS second, 0::int8 AS third, NULL::text AS priority, \
                NULL::timestamptz AS head_due_at \
         FROM live \
         UNION ALL \
         SELECT 'occupancy', queue, tenant_id, running, in_flight, bulk_in_flight, NULL, NULL \
         FROM occupancy \
         UNION ALL \
         SELECT 'candidate', queue, tenant_id, due, weight, cap, priority, head_due_at \
         FROM candidates"
    ))
    .bind::<Int8, _>(LIVE_WITHIN_SECONDS)
    .bind::<Int8, _>(limits.in_flight_per_queue)
    .bind::<Int8, _>(limits.batch_size)
    .bind::<Int8, _>(default_cap)
    .bind::<Array<Text>, _>(&*ANALYSIS_QUEUES)
    .prepared()
    .load::<StateRow>(conn)
    .await?;
    let mut state = State::default();
    for row in rows {
        match (row.kind.as_str(), row.tenant_id) {
            ("slots", _) => {
                state.slots.insert(row.queue, row.first);
            }
            ("occupancy", Some(tenant_id)) => state.occupancy.push(Occupancy {
                queue: row.queue,
                tenant_id,
                running: row.first,
                in_flight: row.second,
                bulk_in_flight: row.third,
            }),
            ("candidate", Some(tenant_id)) => {
                if let Some(head_due_at) = row.head_due_at {
                    state.candidates.push(Candidate {
                        queue: row.queue,
                        priority: Priority::parse(row.priority.as_deref().unwrap_or_default()),
                        tenant_id,
                        due: row.first,
                        head_due_at,
                        weight: row.second,
                        cap: row.third,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(state)
}

/// One scheduling round under [`SCHEDULER_LOCK`]: read the state (`read_state`), plan
/// (`scheduling::plan`), claim. The lock makes dispatchers plan one after another, each
/// counting what the last one claimed as in flight. The round's transaction stays open,
/// holding the lock and its claims, until [`commit_round`] (or [`rollback_round`]): the
/// publisher pushes the claimed events to Redis while the commit is on its way, so the
/// commit's round trip is not on the path of the job (docs/decisions.md, "The round
/// commits while its messages travel"). On an error the transaction is rolled back
/// here, and a claim PostgreSQL refused because a cancel moved one of its picked
/// events out of the live partition meanwhile ([`super::moved`]) is planned again at
/// once.
pub async fn open_round(
    conn: &mut AsyncPgConnection,
    dispatcher_id: &str,
    limits: &Limits,
    default_cap: i64,
) -> Result<RoundClaims, DbError> {
    let mut attempt = 1;
    loop {
        begin_round(conn).await?;
        let claimed = claim_in_round(conn, dispatcher_id, limits, default_cap).await;
        let Err(error) = claimed else {
            return claimed;
        };
        // The claim's error is the one to report; a failed rollback leaves the
        // connection broken, and the pool discards it.
        let rolled_back = rollback_round(conn).await.is_ok();
        match &error {
            DbError::Query(query) if rolled_back && moved::run_again(query, &mut attempt) => {}
            _ => return Err(error),
        }
    }
}

/// What a round claimed, and whether it saw more due than it planned.
pub struct RoundClaims {
    /// In publication order.
    pub events: Vec<ClaimedEvent>,
    /// The round's read counted due events its plan did not take (a bound, a cap or the
    /// batch size held them back): plan again at once, since claims and finishes free
    /// room meanwhile. False: nothing it saw is left ([`scheduling::leaves_due`]).
    pub more_due: bool,
}

/// The round's work in a transaction [`begin_round`] opened: read the state, plan, claim.
pub async fn claim_in_round(
    conn: &mut AsyncPgConnection,
    dispatcher_id: &str,
    limits: &Limits,
    default_cap: i64,
) -> Result<RoundClaims, DbError> {
    let state = read_state(conn, limits, default_cap).await?;
    let picks = scheduling::plan(&state, limits);
    let more_due = scheduling::leaves_due(&state, &picks, limits);
    let events = claim(conn, dispatcher_id, &picks).await?;
    Ok(RoundClaims { events, more_due })
}

/// `PENDING → PUBLISHING` for the plan: each (queue, class, tenant) its next due events,
/// as many as it was picked, skipping rows another dispatcher holds. Guarded again: a
/// pause committed since the state was read holds its events back. Returns the claimed
/// events in publication order (the plan's interleaving of tenants and classes). The
/// update finds the picked rows by key whatever the statistics say
/// ([lookups by key](super#lookups-by-key)); the picks themselves come from
/// `outbox_events_fair_idx`, the only index of due events.
pub async fn claim(
    conn: &mut AsyncPgConnection,
    dispatcher_id: &str,
    picks: &[Pick],
) -> Result<Vec<ClaimedEvent>, DbError> {
    let mut groups: Vec<(&Pick, i64)> = Vec::new();
    for pick in picks {
        match groups.iter_mut().find(|(group, _)| *group == pick) {
            Some((_, count)) => *count += 1,
            None => groups.push((pick, 1)),
        }
    }
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let queues: Vec<&str> = groups.iter().map(|(p, _)| p.queue.as_str()).collect();
    let priorities: Vec<&str> = groups.iter().map(|(p, _)| p.priority.as_str()).collect();
    let tenants: Vec<Uuid> = groups.iter().map(|(p, _)| p.tenant_id).collect();
    let counts: Vec<i64> = groups.iter().map(|(_, n)| *n).collect();
    let claimed = diesel::sql_query(concat!(
        "WITH w AS ( \
             SELECT * FROM unnest($2::text[], $3::text[], $4::uuid[], $5::int8[]) \
                 AS w(queue, priority, tenant_id, n) \
             WHERE NOT EXISTS (SELECT 1 FROM queue_pauses AS p WHERE p.queue = w.queue) \
               AND NOT EXISTS (SELECT 1 FROM tenants AS t \
                               WHERE t.id = w.tenant_id AND t.processing_paused_at IS NOT NULL)), \
         picked AS ( \
             SELECT e.id FROM w CROSS JOIN LATERAL ( \
                 SELECT o.id FROM outbox_events AS o \
                 WHERE o.status = 'PENDING' AND o.queue = w.queue AND o.priority = w.priority \
                   AND o.tenant_id = w.tenant_id AND o.next_attempt_at <= now() \
                 ORDER BY o.next_attempt_at LIMIT w.n \
                 FOR UPDATE SKIP LOCKED) AS e) \
         UPDATE outbox_events \
         SET status = 'PUBLISHING', claimed_at = now(), claimed_by = $1 \
         WHERE id IN (SELECT id FROM picked) AND ",
        live_event!(),
        " \
           AND status IS NOT DISTINCT FROM 'PENDING' \
         RETURNING id, job_id, queue, message, publish_attempts, claimed_at, tenant_id, \
             priority, next_attempt_at"
    ))
    .bind::<Text, _>(dispatcher_id)
    .bind::<Array<Text>, _>(queues)
    .bind::<Array<Text>, _>(priorities)
    .bind::<Array<SqlUuid>, _>(tenants)
    .bind::<Array<Int8>, _>(counts)
    .prepared()
    .load::<ClaimedRow>(conn)
    .await?;
    Ok(in_plan_order(picks, claimed))
}

#[derive(QueryableByName)]
struct ClaimedRow {
    #[diesel(embed)]
    event: ClaimedEvent,
    #[diesel(sql_type = SqlUuid)]
    tenant_id: Uuid,
    #[diesel(sql_type = Text)]
    priority: String,
    #[diesel(sql_type = Timestamptz)]
    next_attempt_at: OffsetDateTime,
}

/// The claimed events in the order of the picks: each pick takes the oldest claimed
/// event of its (queue, class, tenant) not yet taken.
fn in_plan_order(picks: &[Pick], mut claimed: Vec<ClaimedRow>) -> Vec<ClaimedEvent> {
    claimed.sort_by_key(|row| row.next_attempt_at);
    let mut taken = vec![false; claimed.len()];
    let mut ordered = Vec::with_capacity(claimed.len());
    for pick in picks {
        let next = claimed.iter().enumerate().position(|(index, row)| {
            !taken[index]
                && row.event.queue == pick.queue
                && row.tenant_id == pick.tenant_id
                && Priority::parse(&row.priority) == pick.priority
        });
        if let Some(index) = next {
            taken[index] = true;
            ordered.push(index);
        }
    }
    // Never leave a claimed event behind (it would wait for the claim timeout).
    ordered.extend((0..taken.len()).filter(|&index| !taken[index]));
    let mut slots: Vec<Option<ClaimedRow>> = claimed.into_iter().map(Some).collect();
    ordered
        .into_iter()
        .filter_map(|index| slots[index].take().map(|row| row.event))
        .collect()
}
