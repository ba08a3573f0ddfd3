#!/usr/bin/env bash
# examples/tool_idempotency.py against a real executor: start bin/executor with
# its embedded NATS on a free port, a fresh data folder and no tools of its own
# (it learns the tools of the example's Python worker, every 250 ms here), run
# the example with the venv's Python, and stop the executor again.
# Usage: scripts/example-python.sh EXECUTOR PYTHON (make example-python builds both).
set -euo pipefail
cd "$(dirname "$0")/.."
executor=${1:?usage: $0 EXECUTOR PYTHON}
python=${2:?usage: $0 EXECUTOR PYTHON}

# The executor embeds its NATS server: no NATS or toolexec setting of the
# caller's environment (NATS_URL would make it connect elsewhere instead).
for v in $(compgen -e); do
  case $v in NATS_* | TOOLEXEC_*) unset "$v" ;; esac
done

data=$(mktemp -d)
cleanup() {
  if [ -n "${pid:-}" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$data"
}
trap cleanup EXIT

"$executor" --data-dir "$data" --nats-port -1 --workers-interval 250ms >"$data/ready" 2>"$data/executor.log" &
pid=$!
for _ in $(seq 1 100); do
  grep -q ready "$data/ready" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$data/executor.log" >&2; exit 1; }
  sleep 0.1
done
url=$(sed -n 's/.*nats=\([^ ]*\).*/\1/p' "$data/ready")
[ -n "$url" ] || { echo "the executor did not start:" >&2; cat "$data/executor.log" >&2; exit 1; }
# On standard error, so that standard output is the example's own.
echo "executor running with embedded NATS at $url, no tools of its own (it serves the worker's)" >&2
NATS_URL=$url "$python" examples/tool_idempotency.py
