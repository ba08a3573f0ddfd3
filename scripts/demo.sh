#!/usr/bin/env bash
# The main job in one command: start an executor with its embedded NATS server and
# the demo airline tools, then make the calls that show the three outcomes —
# completed, TOOL_DEDUPLICATED and TOOL_INDETERMINATE — and stop it again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

bin=$(mktemp -d)
data=$(mktemp -d)
log="$data/executor.log"
cleanup() {
  if [ -n "${pid:-}" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$bin" "$data"
}
trap cleanup EXIT

# On standard error, so that standard output is the run README.md shows.
echo "building the executor and the emitter (the first build compiles all they use: minutes; later ones take seconds)" >&2
go build -o "$bin/" ./cmd/executor ./cmd/emitter

# Port 4222 is often taken by a NATS server already running; -1 picks a free port.
"$bin/executor" --demo --data-dir "$data" --nats-port "${DEMO_NATS_PORT:--1}" >"$data/ready" 2>"$log" &
pid=$!
for _ in $(seq 1 100); do
  grep -q ready "$data/ready" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
url=$(sed -n 's/.*nats=\([^ ]*\).*/\1/p' "$data/ready")
echo "executor running with embedded NATS at $url (store: JetStream KV, sync always)"

emit() { # description, then emitter call arguments
  local what=$1; shift
  printf '\n$ emitter call --tenant acme --run run_1'
  local a
  for a in "$@"; do
    case $a in *[\ \"{]*) printf " '%s'" "$a" ;; *) printf ' %s' "$a" ;; esac
  done
  printf '\n'
  set +e
  "$bin/emitter" --server "$url" call --tenant acme --run run_1 "$@"
  local code=$?
  set -e
  printf '(exit status %d: %s)\n' "$code" "$what"
}
emit "booked"                    --tool book --args '{"flight":"BA117","seats":1,"request_id":"a"}'
emit "the retry books nothing"   --tool book --args '{"flight":"BA117","seats":1,"request_id":"b"}'
emit "the answer was lost"       --tool book --args '{"flight":"BA999","seats":1,"request_id":"c","fail_after_effect":true}'
emit "never booked twice"        --tool book --args '{"flight":"BA999","seats":1,"request_id":"d"}'
