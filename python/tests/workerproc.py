"""A Python worker in a process of its own, for the tests that kill it or
signal it (test_worker_live.py)::

    python workerproc.py NATS_URL TOOL ENTRIES HOLD TIMEOUT

It serves one effectful tool named TOOL, whose key argument is the flight (the
request id is fresh on every attempt) and whose timeout is TIMEOUT seconds.
The body appends the request id to the file ENTRIES as it enters (one line per
entry, so that the test counts entries even after a SIGKILL), holds HOLD
seconds, and returns ``booked <flight>``. The process runs toolexec.serve:
SIGTERM or SIGINT stops it gracefully, and it exits 0 once stopped."""

from __future__ import annotations

import asyncio
import logging
import sys

from toolexec import Idempotency, IdempotencyPolicy, serve, tool


def main() -> None:
    url, name, entries, hold, timeout = sys.argv[1:6]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    async def body(flight: str, request_id: str) -> str:
        """Book a seat, slowly.

        Args:
            flight: Flight number.
            request_id: Fresh on every attempt, hence no key argument.
        """
        with open(entries, "a", encoding="utf-8") as f:
            f.write(request_id + "\n")
        await asyncio.sleep(float(hold))
        return f"booked {flight}"

    policy = IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flight",))
    served = tool(idempotency=policy, name=name, timeout=float(timeout))(body)
    serve(served, servers=url, version="1.0.0")


if __name__ == "__main__":
    main()
