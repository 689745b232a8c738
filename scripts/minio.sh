#!/usr/bin/env bash
# MinIO, the real S3-compatible server the remote-read tests (and later benchmarks) run against.
#
#   scripts/minio.sh install        go install github.com/minio/minio@latest (skipped when present;
#                                   about 8 minutes on 2 cores)
#   scripts/minio.sh start [PORT]   serve on 127.0.0.1:PORT (default $QUIVER_MINIO_PORT or 9000;
#                                   console on PORT+1); waits until healthy, prints the endpoint
#   scripts/minio.sh stop [PORT]    stop the server that `start` started on PORT
#   scripts/minio.sh env [PORT]     print the AWS_* variables that reach it (for `eval`)
#
# Idempotent: start on a running server prints its endpoint, stop on a stopped one does
# nothing. Data, pid file and log live in ${QUIVER_MINIO_DIR:-~/.cache/quiver-minio}/PORT/.
# Binds to loopback only. Test credentials (not secrets): quiver-test / quiver-test-secret.
set -euo pipefail

MINIO_USER=quiver-test
MINIO_PASSWORD=quiver-test-secret
GOBIN_DIR="$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"
MINIO="${QUIVER_MINIO_BIN:-$GOBIN_DIR/minio}"
[ -x "$MINIO" ] || { [ -x "$HOME/go/bin/minio" ] && MINIO="$HOME/go/bin/minio"; }

say() { echo "minio: $*" >&2; }
die() { say "$*"; exit 1; }

cmd="${1:-}"
PORT="${2:-${QUIVER_MINIO_PORT:-9000}}"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "bad port '$PORT'"
CONSOLE_PORT=$((PORT + 1))
ENDPOINT="http://127.0.0.1:$PORT"
DIR="${QUIVER_MINIO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quiver-minio}/$PORT"
PIDFILE="$DIR/minio.pid"
LOG="$DIR/minio.log"

healthy() { curl -sf -o /dev/null --max-time 2 "$ENDPOINT/minio/health/live"; }

running_pid() {
  # The pid in the pid file, if that process is alive and is a minio server.
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid="$(cat "$PIDFILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  grep -q minio "/proc/$pid/cmdline" 2>/dev/null || return 1
  echo "$pid"
}

port_busy() { ss -Htln "sport = :$1" 2>/dev/null | grep -q .; }

install() {
  if [ -x "$MINIO" ]; then
    say "present at $MINIO"
    return
  fi
  command -v go >/dev/null || die "Go is needed to install MinIO (go install github.com/minio/minio@latest); install Go 1.24+ first"
  say "installing with 'go install github.com/minio/minio@latest' (about 8 minutes on 2 cores)"
  go install github.com/minio/minio@latest
  [ -x "$GOBIN_DIR/minio" ] || die "go install finished but $GOBIN_DIR/minio is missing"
  say "installed $GOBIN_DIR/minio"
}

start() {
  [ -x "$MINIO" ] || die "not installed at $MINIO: run scripts/minio.sh install (or scripts/setup.sh)"
  if pid="$(running_pid)"; then
    for _ in $(seq 1 100); do healthy && break; sleep 0.2; done
    healthy || die "server pid $pid on $ENDPOINT is not healthy; see $LOG"
    say "already running (pid $pid)"
    echo "$ENDPOINT"
    return
  fi
  if port_busy "$PORT" || port_busy "$CONSOLE_PORT"; then
    die "port $PORT or $CONSOLE_PORT on 127.0.0.1 is taken by another process; pick another: scripts/minio.sh start PORT"
  fi
  mkdir -p "$DIR/data"
  # setsid: the server outlives this script and the shell that ran it.
  MINIO_ROOT_USER="$MINIO_USER" MINIO_ROOT_PASSWORD="$MINIO_PASSWORD" \
  MINIO_PROMETHEUS_AUTH_TYPE=public MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off \
    setsid "$MINIO" server --quiet --address "127.0.0.1:$PORT" \
      --console-address "127.0.0.1:$CONSOLE_PORT" "$DIR/data" \
      >"$LOG" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  for _ in $(seq 1 300); do   # up to 60 s
    healthy && { say "started (pid $pid, data in $DIR/data, log $LOG)"; echo "$ENDPOINT"; return; }
    kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; die "the server exited at start; its log ($LOG):
$(tail -20 "$LOG")"; }
    sleep 0.2
  done
  kill "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
  die "not healthy after 60 s on $ENDPOINT; see $LOG"
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PIDFILE"
    say "not running on port $PORT"
    return
  fi
  kill "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
  say "stopped (pid $pid)"
}

case "$cmd" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  env)
    echo "export AWS_ACCESS_KEY_ID=$MINIO_USER AWS_SECRET_ACCESS_KEY=$MINIO_PASSWORD" \
         "AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$ENDPOINT AWS_EC2_METADATA_DISABLED=true"
    ;;
  *) die "usage: scripts/minio.sh {install|start|stop|env} [PORT]" ;;
esac
