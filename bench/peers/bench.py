#!/usr/bin/env python3
"""Driver for the 'integrity' workload. Phases:
  (a) enqueue  N document rows + N jobs from this one process (workers stopped), jobs/s;
  (b) drain    start the workers, N / (last finished_at - first started_at);
  (c) trickle  workers warm, T jobs at a steady R jobs/s, latency enqueue-commit -> row verified.
Prints one JSON line on stdout; progress goes to stderr, logs to $PEERS_LOGS.

Copied from the peers harness (shared/peers) for `scripts/bench peers`; the only change is
that where the database, broker, data and logs live comes from the environment, so that it
runs on the PostgreSQL and Redis that scripts/bench starts (see bench/peers/README.md).
"""
import argparse
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.environ.get
DSN = ENV("PEERS_DSN", "postgresql://postgres@127.0.0.1:55440/peers")
BROKER = ENV("PEERS_BROKER", "redis://127.0.0.1:56390/0")
DATA = ENV("PEERS_DATA", "/tmp/peers-data")
LOGS = ENV("PEERS_LOGS", "/tmp/peers-results")
NODE_MODULES = ENV("PEERS_NODE_MODULES", "/tmp/peers-node/node_modules")
# The server processes whose CPU the report counts (postmaster.pid's first line, redis.pid).
PG_PIDFILE = ENV("PEERS_PG_PIDFILE", "/tmp/peers-pg/data/postmaster.pid")
REDIS_PIDFILE = ENV("PEERS_REDIS_PIDFILE", "/tmp/peers-redis/redis.pid")
FILE_SIZE = 64 * 1024

SCHEMA = """
DROP TABLE IF EXISTS documents;
CREATE TABLE documents (
  id uuid PRIMARY KEY, path text NOT NULL, size bigint NOT NULL, sha256 text NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  started_at timestamptz, finished_at timestamptz  -- measurement only; set by the job's one UPDATE
)"""
INSERT = ("INSERT INTO documents (id, path, size, sha256, status) "
          "VALUES (%(id)s, %(path)s, %(size)s, %(sha256)s, 'pending')")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- systems
class CelerySystem:
    name = "celery"

    def __init__(self, a):
        sys.path.insert(0, HERE)
        import celery
        import celery_tasks
        self.version, self.task, self.a = celery.__version__, celery_tasks.verify, a
        prefetch = celery_tasks.app.conf.worker_prefetch_multiplier
        self.config = f"redis broker, -P {a.pool} -c {a.concurrency}, acks_late, prefetch_multiplier={prefetch}"

    def reset(self, conn):
        import redis
        redis.Redis.from_url(BROKER).flushdb()

    def enqueue(self, conn, doc):
        conn.execute(INSERT, doc)
        conn.commit()                     # Celery has no transactional enqueue: commit, then publish
        t = time.time()
        self.task.apply_async(args=[doc["id"]])
        return t

    def worker(self):
        cmd = [sys.executable, "-m", "celery", "-A", "celery_tasks", "worker",
               "-P", self.a.pool, "-c", str(self.a.concurrency), "-l", "WARNING"]
        return cmd, dict(os.environ, PEERS_CONCURRENCY=str(self.a.concurrency))


class GraphileSystem:
    name = "graphile-worker"

    def __init__(self, a):
        with open(f"{NODE_MODULES}/graphile-worker/package.json") as f:
            self.version = json.load(f)["version"]
        self.a = a
        self.config = (f"{a.procs} process(es) x concurrency={a.concurrency}, localQueue.size={a.local_queue}, "
                       f"completeJobBatchDelay={a.complete_batch_delay}")

    def reset(self, conn):
        conn.execute("DROP SCHEMA IF EXISTS graphile_worker CASCADE")
        conn.commit()
        subprocess.run([f"{NODE_MODULES}/.bin/graphile-worker", "-c", DSN, "--schema-only"],
                       check=True, stdout=subprocess.DEVNULL)

    def enqueue(self, conn, doc):
        conn.execute(INSERT, doc)         # same transaction as the job
        conn.execute("SELECT graphile_worker.add_job('verify', json_build_object('id', %s::text))",
                     (doc["id"],))
        conn.commit()
        return time.time()

    def worker(self):
        env = dict(os.environ, DATABASE_URL=DSN, NODE_PATH=NODE_MODULES, NO_LOG_SUCCESS="1",
                   CONCURRENCY=str(self.a.concurrency), LOCAL_QUEUE=str(self.a.local_queue),
                   COMPLETE_BATCH_DELAY=str(self.a.complete_batch_delay), PROCS=str(self.a.procs))
        return ["node", os.path.join(HERE, "graphile", "worker.js")], env


# ---------------------------------------------------------------- data
def prepare_data(n):
    """N files of 64 KiB random bytes + manifest (id, path, size, sha256); reused and extended."""
    os.makedirs(DATA, exist_ok=True)
    manifest, docs = os.path.join(DATA, "manifest.tsv"), []
    if os.path.exists(manifest):
        with open(manifest) as f:
            docs = [dict(zip(("id", "path", "size", "sha256"), l.split())) for l in f]
    if len(docs) < n:
        log(f"creating {n - len(docs)} files of 64 KiB in {DATA}")
        with open(manifest, "a") as f:
            for _ in range(n - len(docs)):
                i, data = str(uuid.uuid4()), os.urandom(FILE_SIZE)
                path = f"{DATA}/{i}.bin"
                with open(path, "wb") as g:
                    g.write(data)
                docs.append(dict(id=i, path=path, size=FILE_SIZE, sha256=hashlib.sha256(data).hexdigest()))
                f.write("\t".join(str(docs[-1][k]) for k in ("id", "path", "size", "sha256")) + "\n")
    for d in docs:
        d["size"] = int(d["size"])
    return docs[:n]


# ---------------------------------------------------------------- CPU accounting
HZ = os.sysconf("SC_CLK_TCK")


def cpu_snapshot():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    procs = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                s = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            f = s[s.rindex(")") + 2:].split()
            procs[int(p)] = (int(f[1]), int(f[11]) + int(f[12]))  # ppid, utime+stime
    return time.time(), v, procs


def subtree(procs, root):
    kids = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    out, stack = set(), [root]
    while stack:
        p = stack.pop()
        out.add(p)
        stack += kids.get(p, [])
    return out


def cpu_report(s0, s1, roots):
    """Busy share of all cores over [s0, s1] and cores used per process tree."""
    (t0, v0, p0), (t1, v1, p1) = s0, s1
    d = [b - a for a, b in zip(v0, v1)]  # user nice system idle iowait irq softirq steal
    total = sum(d) or 1
    rep = {"window_s": round(t1 - t0, 2), "busy_pct": round(100 * (total - d[3] - d[4] - d[7]) / total, 1),
           "iowait_pct": round(100 * d[4] / total, 1), "steal_pct": round(100 * d[7] / total, 1)}
    ours, seen = 0.0, set()
    for name, root in roots.items():           # first matching tree wins (driver's tree holds the workers)
        pids = subtree(p1, root) - seen
        seen |= pids
        ticks = sum(p1[p][1] - p0.get(p, (0, 0))[1] for p in pids)
        rep[f"{name}_cores"] = round(ticks / HZ / (t1 - t0), 2)
        ours += ticks
    busy_cores = (total - d[3] - d[4] - d[7]) / total * os.cpu_count()
    rep["other_cores"] = round(busy_cores - ours / HZ / (t1 - t0), 2)
    return rep


def wait_quiet(max_wait, threshold=15.0):
    """This machine is shared with other jobs: wait (up to max_wait s) for a 2 s window
    in which the whole machine is < threshold % busy. Returns the last window's busy %."""
    deadline = time.time() + max_wait
    while True:
        v0 = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
        time.sleep(2)
        d = [b - a for a, b in zip(v0, (int(x) for x in open("/proc/stat").readline().split()[1:9]))]
        busy = 100 * (sum(d) - d[3] - d[4] - d[7]) / (sum(d) or 1)
        if busy < threshold or time.time() > deadline:
            return round(busy, 1)
        log(f"  machine busy ({busy:.0f}% of all cores, not us) - waiting for quiet ...")


# ---------------------------------------------------------------- phases
def done_count(mon):
    return mon.execute("SELECT count(*) FROM documents WHERE status <> 'pending'").fetchone()[0]


def wait_all(mon, n, proc, stall_s=60, on_poll=None):
    last, last_t = -1, time.time()
    while (done := done_count(mon)) < n:
        if proc.poll() is not None:
            sys.exit(f"worker exited with {proc.returncode}; see {LOGS}")
        if done != last:
            last, last_t = done, time.time()
        elif time.time() - last_t > stall_s:
            sys.exit(f"stalled: {done}/{n} done, no progress for {stall_s} s; see {LOGS}")
        if on_poll:
            on_poll(done)
        time.sleep(0.05)


def pct(sorted_vals, p):
    return sorted_vals[max(0, math.ceil(p / 100 * len(sorted_vals)) - 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--system", choices=["celery", "graphile"], required=True)
    ap.add_argument("--n", type=int, default=int(os.environ.get("N", 5000)))
    ap.add_argument("--trickle", type=int, default=500)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--pool", default="prefork")                  # celery
    ap.add_argument("--concurrency", type=int)                    # celery 2, graphile 10
    ap.add_argument("--local-queue", type=int, default=-1)        # graphile
    ap.add_argument("--complete-batch-delay", type=int, default=-1)  # graphile
    ap.add_argument("--procs", type=int, default=1)               # graphile worker processes
    ap.add_argument("--quiet-wait", type=float, default=900, help="max s to wait for an idle machine per phase")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below stops the workers
    if a.concurrency is None:
        a.concurrency = 2 if a.system == "celery" else 10
    system = CelerySystem(a) if a.system == "celery" else GraphileSystem(a)
    os.makedirs(LOGS, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    docs = prepare_data(max(a.n, a.trickle))

    conn = psycopg.connect(DSN)                   # the enqueuing client (explicit transactions)
    mon = psycopg.connect(DSN, autocommit=True)   # monitoring
    conn.execute(SCHEMA)
    conn.commit()
    system.reset(conn)

    postmaster = int(open(PG_PIDFILE).readline())
    redis_pid = int(open(REDIS_PIDFILE).read())
    quiet = {"enqueue": wait_quiet(a.quiet_wait)}
    log(f"[{system.name}] enqueue {a.n} ...")
    s0, t0 = cpu_snapshot(), time.perf_counter()
    for d in docs[:a.n]:
        system.enqueue(conn, d)
    enqueue_s = time.perf_counter() - t0
    enqueue_cpu = cpu_report(s0, cpu_snapshot(), {"driver": os.getpid(), "postgres": postmaster, "redis": redis_pid})
    quiet["drain"] = wait_quiet(a.quiet_wait)

    cmd, env = system.worker()
    wlog = open(f"{LOGS}/{a.system}-{stamp}-worker.log", "w")
    proc = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=wlog, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        # ---- (b) drain
        log(f"[{system.name}] drain with {system.config} ...")
        state = {}

        def on_poll(done):
            if done and "s0" not in state:
                state["s0"] = cpu_snapshot()
            if done >= a.n // 3 and "top" not in state:
                state["top"] = subprocess.Popen(["top", "-b", "-n", "2", "-d", "0.5", "-w", "200"],
                                                stdout=subprocess.PIPE, text=True)
        wait_all(mon, a.n, proc, on_poll=on_poll)
        s1 = cpu_snapshot()
        loadavg = open("/proc/loadavg").read().split()[0]
        cpu = cpu_report(state.get("s0", s1), s1, {"workers": proc.pid, "postgres": postmaster,
                                                    "redis": redis_pid, "driver": os.getpid()})
        if "top" in state:
            top = state["top"].communicate()[0]
            with open(f"{LOGS}/{a.system}-{stamp}-top.txt", "w") as f:
                f.write("top - " + top.split("top - ")[-1])
        verified, corrupt, drain_s = mon.execute(
            "SELECT count(*) FILTER (WHERE status = 'verified'), count(*) FILTER (WHERE status = 'corrupt'),"
            " extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM documents").fetchone()

        # ---- (c) trickle, workers warm and idle
        log(f"[{system.name}] trickle {a.trickle} jobs at {a.rate}/s ...")
        mon.execute("TRUNCATE documents")
        quiet["trickle"] = wait_quiet(a.quiet_wait)
        s0 = cpu_snapshot()
        committed, t0 = {}, time.perf_counter()
        for i, d in enumerate(docs[:a.trickle]):
            time.sleep(max(0.0, t0 + i / a.rate - time.perf_counter()))
            committed[d["id"]] = system.enqueue(conn, d)
        trickle_rate = a.trickle / (time.perf_counter() - t0)
        wait_all(mon, a.trickle, proc)
        rows = mon.execute("SELECT id::text, extract(epoch FROM finished_at)::float8 FROM documents").fetchall()
        lat = sorted((fin - committed[i]) * 1000 for i, fin in rows)
        trickle_cpu = cpu_report(s0, cpu_snapshot(), {"workers": proc.pid, "postgres": postmaster,
                                                      "redis": redis_pid, "driver": os.getpid()})
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # leftovers in the worker's own process group, if any
        except ProcessLookupError:
            pass
        proc.wait()
        wlog.close()

    print(json.dumps({
        "system": system.name, "version": system.version, "n": a.n,
        "enqueue_jobs_per_s": round(a.n / enqueue_s, 1),
        "drain_jobs_per_s": round(a.n / drain_s, 1),
        "p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2), "p99_ms": round(pct(lat, 99), 2),
        "config": system.config, "verified": verified, "corrupt": corrupt, "drain_s": round(drain_s, 3),
        "trickle_n": a.trickle, "trickle_rate": round(trickle_rate, 1), "max_ms": round(lat[-1], 2),
        "drain_cpu": cpu, "loadavg_1m": float(loadavg), "enqueue_cpu": enqueue_cpu,
        "trickle_cpu": trickle_cpu, "busy_before_pct": quiet,
        # other processes on this shared machine took > 0.15 core during a measured phase
        "contended": any(c["other_cores"] > 0.15 for c in (enqueue_cpu, cpu, trickle_cpu)),
    }), flush=True)


if __name__ == "__main__":
    main()
