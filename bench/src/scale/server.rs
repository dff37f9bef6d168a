//! What the server and the machine were busy with during a phase of the `scale`
//! scenario, beside the statements' own counters: the wait events of PostgreSQL's
//! processes sampled every [`PERIOD`] (a statement that is slower with the history
//! either works more, which its blocks show, or waits, which this shows), what autovacuum
//! was vacuuming, the checkpoints and WAL of the phase, and how much of the kernel's page
//! cache was dirty (a seeding of gigabytes leaves the kernel writing them back for
//! minutes, and a writer past the dirty limit is throttled).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use procfs::Current;
use quire_shared::db::PgPool;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How often the server's processes are sampled.
const PERIOD: Duration = Duration::from_millis(20);

/// A phase starts once the kernel holds at most this much dirty page cache.
const SETTLED_MIB: f64 = 64.0;

/// How long a phase waits for the kernel's write-back before it starts anyway.
const SETTLE_LIMIT: Duration = Duration::from_secs(600);

/// How often the write-back is looked at while settling.
const SETTLE_POLL: Duration = Duration::from_millis(200);

/// The relations a phase's lines show: those read the most.
const RELATIONS_SHOWN: usize = 12;

/// The activity of a phase.
#[derive(Debug, Default)]
pub struct Activity {
    /// Seconds the phase waited for the server to settle before it started.
    pub settle_seconds: f64,
    pub samples: u64,
    /// (process, wait) → samples it was seen in. A process that runs on a core or waits
    /// for one has no wait event: it counts as `cpu`.
    pub waits: BTreeMap<(String, String), u64>,
    /// The kernel's dirty and writeback pages, MiB: mean and max over the samples.
    pub dirty_mib_mean: f64,
    pub dirty_mib_max: f64,
    pub counters: Counters,
    /// Blocks of each table and index found in shared buffers and read from outside them
    /// during the phase: (relation, hit, read), most read first.
    pub relations: Vec<(String, i64, i64)>,
}

#[derive(QueryableByName)]
struct RelationBlocks {
    #[diesel(sql_type = Text)]
    relation: String,
    #[diesel(sql_type = BigInt)]
    hit: i64,
    #[diesel(sql_type = BigInt)]
    read: i64,
}

/// Every table's heap and every index of this database, by name.
async fn read_relations(
    conn: &mut AsyncPgConnection,
) -> anyhow::Result<BTreeMap<String, (i64, i64)>> {
    let rows: Vec<RelationBlocks> = diesel::sql_query(
        "SELECT relname AS relation, coalesce(heap_blks_hit, 0) AS hit, \
                coalesce(heap_blks_read, 0) AS read \
         FROM pg_statio_user_tables \
         UNION ALL \
         SELECT indexrelname, coalesce(idx_blks_hit, 0), coalesce(idx_blks_read, 0) \
         FROM pg_statio_user_indexes",
    )
    .load(conn)
    .await
    .context("failed to read pg_statio_user_tables and pg_statio_user_indexes")?;
    Ok(rows
        .into_iter()
        .map(|row| (row.relation, (row.hit, row.read)))
        .collect())
}

/// The relations whose blocks moved since `start`, most read first.
fn relations_since(
    end: BTreeMap<String, (i64, i64)>,
    start: &BTreeMap<String, (i64, i64)>,
) -> Vec<(String, i64, i64)> {
    let mut moved: Vec<(String, i64, i64)> = end
        .into_iter()
        .map(|(relation, (hit, read))| {
            let (hit_before, read_before) = start.get(&relation).copied().unwrap_or_default();
            (relation, hit - hit_before, read - read_before)
        })
        .filter(|(_, hit, read)| hit + read > 0)
        .collect();
    moved.sort_by_key(|(_, hit, read)| std::cmp::Reverse((*read, *hit)));
    moved
}

/// The server-wide counters of `pg_stat_bgwriter` and `pg_stat_wal`.
#[derive(Debug, Default, Clone, Copy, QueryableByName)]
pub struct Counters {
    #[diesel(sql_type = BigInt)]
    pub checkpoints: i64,
    #[diesel(sql_type = BigInt)]
    pub buffers_checkpoint: i64,
    #[diesel(sql_type = BigInt)]
    pub buffers_clean: i64,
    /// Buffers a backend wrote itself to find room: the ones that wait on the write.
    #[diesel(sql_type = BigInt)]
    pub buffers_backend: i64,
    #[diesel(sql_type = BigInt)]
    pub buffers_alloc: i64,
    #[diesel(sql_type = BigInt)]
    pub wal_records: i64,
    #[diesel(sql_type = BigInt)]
    pub wal_fpi: i64,
    #[diesel(sql_type = BigInt)]
    pub wal_bytes: i64,
}

impl Counters {
    async fn read(conn: &mut AsyncPgConnection) -> anyhow::Result<Self> {
        diesel::sql_query(
            "SELECT b.checkpoints_timed + b.checkpoints_req AS checkpoints, \
                    b.buffers_checkpoint, b.buffers_clean, b.buffers_backend, b.buffers_alloc, \
                    w.wal_records, w.wal_fpi, w.wal_bytes::bigint AS wal_bytes \
             FROM pg_stat_bgwriter AS b, pg_stat_wal AS w",
        )
        .get_result(conn)
        .await
        .context("failed to read pg_stat_bgwriter and pg_stat_wal")
    }

    fn since(self, start: Self) -> Self {
        Self {
            checkpoints: self.checkpoints - start.checkpoints,
            buffers_checkpoint: self.buffers_checkpoint - start.buffers_checkpoint,
            buffers_clean: self.buffers_clean - start.buffers_clean,
            buffers_backend: self.buffers_backend - start.buffers_backend,
            buffers_alloc: self.buffers_alloc - start.buffers_alloc,
            wal_records: self.wal_records - start.wal_records,
            wal_fpi: self.wal_fpi - start.wal_fpi,
            wal_bytes: self.wal_bytes - start.wal_bytes,
        }
    }
}

#[derive(QueryableByName)]
struct Seen {
    #[diesel(sql_type = Text)]
    process: String,
    #[diesel(sql_type = Text)]
    wait: String,
    #[diesel(sql_type = BigInt)]
    count: i64,
}

/// Every working process of the server: client backends running a statement (not the
/// sampler), autovacuum by the table it works on, and the background writers when they
/// are not idle.
const SAMPLE: &str = "\
    SELECT CASE WHEN backend_type = 'autovacuum worker' \
                THEN left(coalesce(query, 'autovacuum'), 80) \
                ELSE backend_type END AS process, \
           coalesce(wait_event_type || ':' || wait_event, 'cpu') AS wait, \
           count(*)::bigint AS count \
    FROM pg_stat_activity \
    WHERE pid <> pg_backend_pid() \
      AND ((backend_type = 'client backend' AND state = 'active') \
           OR (backend_type <> 'client backend' AND wait_event_type IS DISTINCT FROM 'Activity')) \
    GROUP BY 1, 2";

/// Samples the server until [`Sampler::finish`].
pub struct Sampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<Activity>>,
}

impl Sampler {
    /// Settles the server ([`settle`]), then samples it.
    pub async fn start(pool: &PgPool) -> anyhow::Result<Self> {
        let mut conn = pool.get().await?;
        let settle_seconds = settle(&mut conn).await?;
        let start = Counters::read(&mut conn).await?;
        let relations_start = read_relations(&mut conn).await?;
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut activity = Activity {
                settle_seconds,
                ..Activity::default()
            };
            let mut dirty_sum = 0.0;
            let mut ticks = tokio::time::interval(PERIOD);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = ticks.tick() => {}
                }
                let seen: Vec<Seen> = diesel::sql_query(SAMPLE)
                    .load(&mut conn)
                    .await
                    .context("failed to sample pg_stat_activity")?;
                for seen in seen {
                    *activity.waits.entry((seen.process, seen.wait)).or_default() +=
                        u64::try_from(seen.count).unwrap_or_default();
                }
                let dirty = dirty_mib();
                dirty_sum += dirty;
                activity.dirty_mib_max = activity.dirty_mib_max.max(dirty);
                activity.samples += 1;
            }
            activity.dirty_mib_mean = dirty_sum / activity.samples.max(1) as f64;
            activity.counters = Counters::read(&mut conn).await?.since(start);
            activity.relations =
                relations_since(read_relations(&mut conn).await?, &relations_start);
            Ok(activity)
        });
        Ok(Self { stop, task })
    }

    pub async fn finish(self) -> anyhow::Result<Activity> {
        // The task may have ended on an error already: its result tells.
        let _ = self.stop.send(());
        self.task.await.context("the server's sampler panicked")?
    }
}

/// Writes back what the previous steps left before a phase starts: a `CHECKPOINT`, then
/// the kernel's dirty page cache down to [`SETTLED_MIB`] (at most [`SETTLE_LIMIT`]); the
/// seconds it took. Seeding the history leaves gigabytes of dirty pages, which the kernel
/// writes back for minutes; every commit's WAL flush queues behind them meanwhile, and a
/// phase measured then measures the disk's write-back of the seeding (a database that
/// holds six days of history wrote them long ago). Every phase settles alike, the empty
/// one too. The checkpoint also means each page a phase touches first costs a full-page
/// image, as it does after every checkpoint in production.
async fn settle(conn: &mut AsyncPgConnection) -> anyhow::Result<f64> {
    let started = tokio::time::Instant::now();
    diesel::sql_query("CHECKPOINT")
        .execute(conn)
        .await
        .context("failed to checkpoint before a phase")?;
    while dirty_mib() > SETTLED_MIB && started.elapsed() < SETTLE_LIMIT {
        tokio::time::sleep(SETTLE_POLL).await;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The kernel's dirty and writeback page cache, MiB (0 where /proc cannot tell).
fn dirty_mib() -> f64 {
    procfs::Meminfo::current().map_or(0.0, |meminfo| {
        (meminfo.dirty + meminfo.writeback) as f64 / 1048576.0
    })
}

impl Activity {
    /// The waits seen in at least one sample in a hundred, most seen first.
    fn busiest(&self) -> Vec<(&(String, String), u64)> {
        let mut waits: Vec<_> = self
            .waits
            .iter()
            .map(|(key, count)| (key, *count))
            .filter(|(_, count)| *count * 100 >= self.samples)
            .collect();
        waits.sort_by_key(|wait| std::cmp::Reverse(wait.1));
        waits
    }

    pub fn json(&self) -> Value {
        let counters = &self.counters;
        json!({
            "settle_seconds": self.settle_seconds,
            "samples": self.samples,
            "sample_ms": PERIOD.as_millis() as u64,
            "waits": self.busiest().iter().map(|((process, wait), count)| json!({
                "process": process,
                "wait": wait,
                "samples": count,
            })).collect::<Vec<_>>(),
            "dirty_mib_mean": self.dirty_mib_mean,
            "dirty_mib_max": self.dirty_mib_max,
            "checkpoints": counters.checkpoints,
            "buffers_checkpoint": counters.buffers_checkpoint,
            "buffers_clean": counters.buffers_clean,
            "buffers_backend": counters.buffers_backend,
            "buffers_alloc": counters.buffers_alloc,
            "wal_records": counters.wal_records,
            "wal_fpi": counters.wal_fpi,
            "wal_bytes": counters.wal_bytes,
            "relations": self.relations.iter().map(|(relation, hit, read)| json!({
                "relation": relation,
                "blocks_hit": hit,
                "blocks_read": read,
            })).collect::<Vec<_>>(),
        })
    }

    /// The phase's lines of the report: the processes' mean count in each wait (how many
    /// were in it at once, on average), then the counters.
    pub fn print(&self, phase: &str) {
        let counters = &self.counters;
        println!(
            "  {phase}: settled in {:.0} s; {} samples; checkpoints {}, buffers written by checkpoints {} / the \
             background writer {} / backends {}, allocated {}; WAL {:.1} MiB, {} records, \
             {} full pages; dirty page cache {:.0} MiB mean, {:.0} max",
            self.settle_seconds,
            self.samples,
            counters.checkpoints,
            counters.buffers_checkpoint,
            counters.buffers_clean,
            counters.buffers_backend,
            counters.buffers_alloc,
            counters.wal_bytes as f64 / 1048576.0,
            counters.wal_records,
            counters.wal_fpi,
            self.dirty_mib_mean,
            self.dirty_mib_max,
        );
        for ((process, wait), count) in self.busiest() {
            println!(
                "    {:.2} {process} {wait}",
                count as f64 / self.samples.max(1) as f64
            );
        }
        println!("    blocks read from outside shared buffers / found in them, by relation:");
        for (relation, hit, read) in self.relations.iter().take(RELATIONS_SHOWN) {
            println!("      {read} / {hit} {relation}");
        }
    }
}
