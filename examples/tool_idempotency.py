"""Tool idempotency from Python, end to end: the seed's airline, its tool
bodies served by a Python worker and its calls made by a Python client,
through an executor (Go) that holds the record of what already happened.

Four bookings show the three signals:

* ``book BA117``: the seat is taken, and the call is completed;
* its retry, with a fresh ``request_id`` (not a key argument, so the same
  key): answered from the record, TOOL_DEDUPLICATED, nothing booked twice;
* ``book BA999`` whose answer is lost after the seat was taken
  (``fail_after_effect``, as the demo airline's): nobody can say whether the
  seat is booked, so the call is TOOL_INDETERMINATE;
* its retry: TOOL_INDETERMINATE too, and the body is not entered again. An
  operator settles the key (``emitter inspect`` and ``resolve``).

Run it against an executor that learns the workers' tools and has no tools of
these names itself (not ``--demo``, whose book would be a second body for the
name: a conflict), with a fresh data folder (the run id is fixed, so a second
run finds the first one's records)::

    make example-python

or, with an executor running, ``NATS_URL=nats://127.0.0.1:4222 python
examples/tool_idempotency.py`` in an environment where ``pip install
./python`` was run.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from toolexec import (
    Client,
    Idempotency,
    IdempotencyPolicy,
    IndeterminateOutcomeError,
    ToolContext,
    Worker,
    tool,
)

#: The in-memory airline: seats taken, by flight.
SEATS: dict[str, int] = {}
#: How many times each tool's body was entered.
ENTERED: dict[str, int] = {"lookup_fare": 0, "book": 0}


@tool(idempotency=IdempotencyPolicy(Idempotency.READ_ONLY))
async def lookup_fare(flight: str) -> str:
    """Read the current fare.

    Args:
        flight: Which flight.
    """
    ENTERED["lookup_fare"] += 1
    return "142.00 GBP"


@tool(
    idempotency=IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flight",)),
    timeout=10,
)
async def book(
    flight: str, request_id: str, ctx: ToolContext, fail_after_effect: bool = False
) -> str:
    """Take a seat.

    Args:
        flight: Which flight.
        request_id: Fresh on every attempt, which is why it is not a key argument.
        fail_after_effect: Lose the answer once the seat is taken (to show an
            outcome nobody can state).
    """
    ENTERED["book"] += 1
    SEATS[flight] = SEATS.get(flight, 0) + 1  # the effect
    if fail_after_effect:
        raise TimeoutError("the airline took the seat, then its answer was lost")
    # The key is what a real airline would be given as its own Idempotency-Key.
    assert ctx.idempotency_key is not None
    return "PNR-" + ctx.idempotency_key[:6].upper()


async def wait_until_served(client: Client, names: set[str], limit: float = 30.0) -> None:
    """The executors learn a worker's tools every --workers-interval (5 s by
    default): wait until their catalog lists these."""
    deadline = time.monotonic() + limit
    while names - {t.name for t in await client.tools("acme")}:
        if time.monotonic() > deadline:
            sys.exit(
                f"the executor does not serve {', '.join(sorted(names))} from this worker "
                f"within {limit:g}s: is it running with --workers, and without --demo (whose "
                "own book and lookup_fare would be in conflict with these)?"
            )
        await asyncio.sleep(0.1)


async def main() -> None:
    servers = os.environ.get("NATS_URL") or "nats://127.0.0.1:4222"
    async with (
        Worker.connect(lookup_fare, book, servers=servers, version="1.0.0"),
        Client.connect(servers, run_id="run_1", source="/agents/example-python") as client,
    ):
        await wait_until_served(client, {"lookup_fare", "book"})
        fare = await client.call("acme", "lookup_fare", {"flight": "BA117"})
        print(f"{'lookup_fare BA117':36} → {fare.kind.name}: {fare.outcome}")
        lost = {"flight": "BA999", "request_id": "c", "fail_after_effect": True}
        calls: list[tuple[str, dict[str, Any]]] = [
            ("book BA117", {"flight": "BA117", "request_id": "a"}),
            ("retry, fresh request_id", {"flight": "BA117", "request_id": "b"}),
            ("book BA999, answer lost", lost),
            ("retry BA999", {"flight": "BA999", "request_id": "d"}),
        ]
        for what, args in calls:
            try:
                result = await client.call("acme", "book", args)
            except IndeterminateOutcomeError as e:
                key = f"{e.key[:12]}…" if e.key else "none"
                print(f"{what:36} → TOOL_INDETERMINATE: reason={e.reason} key={key}")
            else:
                print(f"{what:36} → {result.kind.name}: {result.outcome}")
    print(
        f"book's body entered {ENTERED['book']} times for 4 calls; seats taken: "
        + ", ".join(f"{f}={n}" for f, n in sorted(SEATS.items()))
    )


if __name__ == "__main__":
    asyncio.run(main())
