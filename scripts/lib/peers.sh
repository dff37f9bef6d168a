# `scripts/bench peers`: what the peer systems of bench/peers/ need (a Python venv for
# Celery, the harness's driver and the FastAPI upload peer; graphile-worker's
# node_modules; wrk), and the run itself (peers_run). Sourced by scripts/bench only, after
# scripts/lib/services.sh (apt_install, say): scripts/test and CI never install any of it.

# The venv and node_modules live under target/ (ignored by git, kept between runs, gone
# with `cargo clean`): installing them takes a minute or two, the runs themselves seconds.
peers_cache="$PWD/target/bench-peers"
peers_venv="$peers_cache/venv"
peers_node="$peers_cache/node"

# ensure_peer_tools: python3 with venv, node and npm, wrk, from Debian when missing.
ensure_peer_tools() {
  local missing=()
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  command -v wrk >/dev/null 2>&1 || missing+=(wrk)
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
  fi
}

# ensure_peer_venv: the venv of bench/peers/requirements.txt (pinned), rebuilt when the
# requirements change.
ensure_peer_venv() {
  local requirements="bench/peers/requirements.txt"
  if cmp -s "$requirements" "$peers_venv/.installed" 2>/dev/null; then return 0; fi
  say "installing the peers' python packages into $peers_venv"
  rm -rf "$peers_venv"
  python3 -m venv "$peers_venv"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$peers_venv/bin/pip" install --quiet -r "$requirements"
  cp "$requirements" "$peers_venv/.installed"
}

# ensure_peer_node: graphile-worker from bench/peers/graphile/package-lock.json (npm ci).
ensure_peer_node() {
  local lock="bench/peers/graphile/package-lock.json"
  if cmp -s "$lock" "$peers_node/package-lock.json" 2>/dev/null &&
    [ -d "$peers_node/node_modules/graphile-worker" ]; then
    return 0
  fi
  say "installing graphile-worker into $peers_node (npm ci)"
  rm -rf "$peers_node"
  mkdir -p "$peers_node"
  cp bench/peers/graphile/package.json "$lock" "$peers_node/"
  (cd "$peers_node" && npm ci --no-audit --no-fund --silent >&2)
}

# The processes peers_run has running (the FastAPI peer's uvicorn, whose parent stops
# its 2 workers on SIGTERM; a quire-api and its provisioning dispatcher and worker);
# scripts/bench's exit trap calls this too.
peers_pids=()
peers_cleanup() {
  local pid
  for pid in "${peers_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${peers_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  peers_pids=()
}

# peers_wait_http URL LOG: until URL answers 200 (60 s at most, while the last process
# started lives).
peers_wait_http() {
  local deadline=$((SECONDS + 60)) pid="${peers_pids[-1]}"
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ]; do
    if [ "$SECONDS" -gt "$deadline" ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "$1 did not answer: see $2" >&2
      return 1
    fi
    sleep 0.2
  done
}

# peers_wrk TOKEN URL OUT: upload.lua's 64 KiB multipart uploads, 16 connections.
# This and peers_quire_wrk run inside peers_run and use its locals (wrk_seconds,
# run_dir, results) and helpers (checkpoint, wait_quiet).
peers_wrk() {
  TOKEN="$1" SIZE=65536 wrk -t2 -c16 -d"${wrk_seconds}s" -s bench/peers/upload/upload.lua "$2" >"$3"
}

# peers_quire_wrk: quire-api under the same wrk run as the FastAPI peer, so that the
# two upload figures also compare with one client. A dispatcher and a worker run only
# while the tenant is provisioned (a job like any other); the API then runs alone, as
# in quire-bench's upload run and in the harness's first measurement.
peers_quire_wrk() {
  local user=00000000-0000-7000-8000-0000000000b1 port tenant token
  local quire_env=(QUIRE__REDIS__NAMESPACE=peers-wrk RUST_LOG=warn
    QUIRE__DISPATCHER__PROBE_LISTEN= QUIRE__WORKER__PROBE_LISTEN= QUIRE__SERVER__ADMIN_LISTEN=
    QUIRE__SCHEDULES__EMPTY_TRASH__ENABLED=false QUIRE__SCHEDULES__INTEGRITY_SCRUB__ENABLED=false
    QUIRE__SCHEDULES__STORAGE_GC__ENABLED=false)
  env "${quire_env[@]}" "$bin/quire-dispatcher" >"$run_dir/logs/quire-wrk-dispatcher.log" 2>&1 &
  peers_pids+=($!)
  env "${quire_env[@]}" "$bin/quire-worker" >"$run_dir/logs/quire-wrk-worker.log" 2>&1 &
  peers_pids+=($!)
  tenant="$(env "${quire_env[@]}" "$bin/quire-admin" tenant create --name peers-wrk --owner "$user")"
  token="$(env "${quire_env[@]}" "$bin/quire-admin" token --tenant "$tenant" --user "$user" --ttl-seconds 3600)"
  peers_cleanup
  port="$(free_port)"
  # The enqueue limit stays on at a rate no run reaches, as in quire-bench.
  env "${quire_env[@]}" QUIRE__SERVER__HOST=127.0.0.1 QUIRE__SERVER__PORT="$port" \
    QUIRE__ENQUEUE_LIMIT__PER_SECOND=100000 QUIRE__ENQUEUE_LIMIT__BURST=100000 \
    "$bin/quire-api" >"$run_dir/logs/quire-wrk-api.log" 2>&1 &
  peers_pids+=($!)
  peers_wait_http "http://127.0.0.1:$port/readyz" "$run_dir/logs/quire-wrk-api.log"
  checkpoint
  wait_quiet
  say "quire: uploads under wrk (16 connections, ${wrk_seconds}s)"
  peers_wrk "$token" "http://127.0.0.1:$port/api/documents" "$results/quire-wrk.txt"
  peers_cleanup
}

# peers_run [--jobs N] [--seconds T] [--uploads U] [--wrk-seconds S] [--quiet-wait W]
#           [--no-s3] [--out PATH] [quire-bench args...]
# Called by scripts/bench with its stack up ($work, $bin, $pg_port, $redis_port, the
# QUIRE__/DATABASE_URL environment): Quire's integrity bench (N jobs, T s at 50 jobs/s,
# U uploads from 16 clients), its no-op drain, the integrity drain again at the worker's
# default slots, T s at 500 jobs/s and U uploads on S3;
# then Celery and graphile-worker through bench/peers/bench.py on the same N and 50*T
# trickle jobs, and the FastAPI upload peer and quire-api under wrk (16 connections,
# S s); then bench/peers/compare.py's table and the combined JSON at PATH.
peers_run() {
  local jobs=5000 seconds=10 uploads=2000 wrk_seconds=15 quiet_wait=60 s3=1 out="" rest=()
  while [ "$#" -gt 0 ]; do
    case "$1" in
      --jobs) jobs="$2"; shift 2 ;;
      --seconds) seconds="$2"; shift 2 ;;
      --uploads) uploads="$2"; shift 2 ;;
      --wrk-seconds) wrk_seconds="$2"; shift 2 ;;
      --quiet-wait) quiet_wait="$2"; shift 2 ;;
      --no-s3) s3=""; shift ;;
      --out) out="$2"; shift 2 ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  # Each run's logs (every quire-bench output, the peers' worker logs) and its JSON in a
  # folder of its own.
  local run_dir
  run_dir="$peers_cache/$(date -u +%Y%m%dT%H%M%SZ)"
  mkdir -p "$run_dir/logs"
  [ -n "$out" ] || out="$run_dir/peers.json"

  ensure_peer_tools
  ensure_peer_venv
  ensure_peer_node
  if [ -n "$s3" ]; then
    if ! declare -F start_seaweedfs >/dev/null; then
      echo "scripts/bench peers needs the S3 backend's SeaweedFS helpers (or --no-s3)" >&2
      return 1
    fi
    ensure_seaweedfs
  fi

  local results="$work/peers/results"
  mkdir -p "$results" "$work/peers/data" "$work/peers/uploads"
  psql_bench() { as_pg psql -h 127.0.0.1 -p "$pg_port" -U postgres -qAt "$@"; }
  # Every system starts from the same server state: no checkpoint left over from the last.
  checkpoint() { psql_bench -c CHECKPOINT >/dev/null; }
  # The peers' harness waits for an idle machine (< 15 % busy for 2 s, --quiet-wait s
  # at most) before each of its phases; Quire's runs start the same way.
  wait_quiet() {
    PYTHONDONTWRITEBYTECODE=1 "$peers_venv/bin/python" -c \
      'import sys; sys.path.insert(0, "bench/peers"); import bench; bench.wait_quiet(float(sys.argv[1]))' \
      "$quiet_wait" >/dev/null
  }
  # quire_bench NAME ARGS...: one quire-bench run, its JSON line to NAME.json, the whole
  # output to the logs.
  quire_bench() {
    local name="$1"
    shift
    checkpoint
    wait_quiet
    say "quire: $name"
    $bin/quire-bench "$@" "${rest[@]}" | tee "$run_dir/logs/quire-$name.txt" | sed -n 1p >"$results/quire-$name.json"
  }
  quire_bench integrity --workload integrity --jobs "$jobs" --rate 50 --seconds "$seconds" \
    --uploads "$uploads" --upload-clients 16 --file-size 65536
  quire_bench noop --workload noop --jobs "$jobs" --rate 0 --uploads 0
  # The same integrity drain at the worker's own default slots (`worker.concurrency`):
  # the bench's --slots default (16) need not be the worker's.
  local default_slots
  default_slots="$(python3 -c 'import tomllib, sys
print(tomllib.load(open(sys.argv[1], "rb"))["worker"]["concurrency"])' config/default.toml)"
  quire_bench default-slots --workload integrity --jobs "$jobs" --rate 0 --uploads 0 \
    --file-size 65536 --slots "$default_slots"
  quire_bench 500 --workload integrity --jobs 0 --rate 500 --seconds "$seconds" --uploads 0 \
    --file-size 65536
  if [ -n "$s3" ]; then
    local s3_port
    s3_port="$(seaweedfs_port)"
    say "starting seaweedfs (s3) on :$s3_port"
    start_seaweedfs "$work/seaweedfs" "$s3_port" quire-bench
    QUIRE__STORAGE__S3__ENDPOINT="http://127.0.0.1:$s3_port" QUIRE__STORAGE__S3__BUCKET=quire-bench \
      QUIRE__STORAGE__S3__PATH_STYLE=true QUIRE__STORAGE__S3__ACCESS_KEY_ID="$seaweedfs_access_key" \
      QUIRE__STORAGE__S3__SECRET_ACCESS_KEY="$seaweedfs_secret_key" \
      quire_bench s3 --workload integrity --storage s3 --jobs 0 --rate 0 --uploads "$uploads" \
      --upload-clients 16 --file-size 65536
    stop_seaweedfs "$work/seaweedfs"
  fi

  # The peers run on this same PostgreSQL (database peers) and Redis (database 1, which
  # Celery's reset flushes; Quire's runs use database 0 and are over).
  psql_bench -c "CREATE DATABASE peers" >/dev/null
  local peer_env=(
    PEERS_DSN="postgresql://postgres@127.0.0.1:$pg_port/peers"
    PEERS_BROKER="redis://127.0.0.1:$redis_port/1"
    PEERS_DATA="$work/peers/data" PEERS_LOGS="$run_dir/logs"
    PEERS_NODE_MODULES="$peers_node/node_modules"
    PEERS_PG_PIDFILE="$work/postgres/postmaster.pid" PEERS_REDIS_PIDFILE="$work/redis/redis.pid"
    PEERS_UPLOADS="$work/peers/uploads" PEERS_TOKEN=peer-token PYTHONDONTWRITEBYTECODE=1
  )
  local system
  for system in celery graphile; do
    checkpoint
    say "peer: $system"
    env "${peer_env[@]}" "$peers_venv/bin/python" bench/peers/bench.py --system "$system" \
      --n "$jobs" --trickle $((50 * seconds)) --rate 50 --quiet-wait "$quiet_wait" |
      tail -n 1 >"$results/$system.json"
  done

  checkpoint
  wait_quiet
  say "peer: fastapi uploads (wrk, 16 connections, ${wrk_seconds}s)"
  # (app.py's on_event startup hook warns of its deprecation on import: not ours to fix.)
  (cd bench/peers/upload && env "${peer_env[@]}" PYTHONWARNINGS=ignore::DeprecationWarning \
    "$peers_venv/bin/python" app.py schema)
  local api_port
  api_port="$(free_port)"
  env "${peer_env[@]}" "$peers_venv/bin/uvicorn" app:app --app-dir bench/peers/upload --workers 2 \
    --host 127.0.0.1 --port "$api_port" --log-level warning >"$run_dir/logs/fastapi.log" 2>&1 &
  peers_pids+=($!)
  peers_wait_http "http://127.0.0.1:$api_port/openapi.json" "$run_dir/logs/fastapi.log"
  peers_wrk peer-token "http://127.0.0.1:$api_port/api/documents" "$results/fastapi-wrk.txt"
  peers_cleanup

  peers_quire_wrk

  local meta
  meta="$(jq -nc --arg commit "$(git rev-parse --short HEAD)" --arg debug "${QUIRE_BENCH_DEBUG:-0}" \
    --arg machine "$(nproc) cores, $(uname -r)" --arg at "$(date -u +%FT%TZ)" \
    --argjson jobs "$jobs" --argjson seconds "$seconds" --argjson uploads "$uploads" \
    --argjson wrk_seconds "$wrk_seconds" --arg rest "${rest[*]}" \
    '{at: $at, commit: $commit, debug_builds: ($debug == "1"), machine: $machine, jobs: $jobs,
      trickle_seconds: $seconds, trickle_rate: 50, uploads: $uploads, upload_clients: 16,
      file_size: 65536, wrk_seconds: $wrk_seconds, quire_bench_args: $rest}')"
  # wrk's own report (latency spread, socket errors, non-2xx answers) beside the logs: the
  # summary line upload.lua writes counts failures without saying which.
  cp "$results"/*-wrk.txt "$run_dir/logs/" 2>/dev/null || true
  say "same run, ratios (N = $jobs, ${seconds}s at 50 jobs/s)"
  python3 bench/peers/compare.py --dir "$results" --out "$out" --meta "$meta"
  echo "combined JSON: $out"
}
