"""The Python rows of make bench (bench/pythonrow.go runs them): a Python
caller (toolexec.Client) against a Go executor whose tool body a Python worker
(toolexec.Worker) serves, each in a process of its own, with the venv's
interpreter.

    python_row.py worker URL TOOL
        serves TOOL, an effectful tool keyed on its flight, until SIGTERM or
        SIGINT; prints "ready <service id>" once serving and, once stopped,
        "entered <n>": the times its body was entered.

    python_row.py caller URL TOOL --calls N --concurrency C --warmup W
                  --duplicates F --seed S
        waits until the executors serve TOOL, makes W warm-up calls (keys of
        their own, not measured), then N calls with C of them in flight, a
        share F of which repeat the key of another call of the run (their
        request ids differ, as a retry's would); prints one JSON object: the
        calls, the answers by kind, the distinct keys, the seconds, calls per
        second and the latency percentiles of a call (from Client.call's start
        to its return) in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
import uuid
from typing import Any

from toolexec import (
    CallError,
    Client,
    Idempotency,
    IdempotencyPolicy,
    ToolContext,
    Worker,
    tool,
)

#: How many times the worker's body was entered.
ENTERED = [0]


def _tool(name: str) -> Any:
    async def book(flight: str, request_id: str, ctx: ToolContext) -> str:
        """Take a seat (nothing but a count here: the row measures the path).

        Args:
            flight: Which flight.
            request_id: Fresh on every attempt, hence no key argument.
        """
        ENTERED[0] += 1
        return "PNR-" + (ctx.idempotency_key or "none")[:6].upper()

    policy = IdempotencyPolicy(Idempotency.EFFECTFUL, key_arguments=("flight",))
    return tool(idempotency=policy, name=name, timeout=30)(book)


async def serve_worker(url: str, name: str) -> None:
    worker = await Worker.connect(_tool(name), servers=url, version="1.0.0")
    print("ready", worker.id, flush=True)
    await worker.run()
    print("entered", ENTERED[0], flush=True)


def plan_keys(n: int, duplicates: float, seed: int) -> tuple[list[int], int]:
    """n key numbers: 0..distinct-1 once each, and the rest repeating them at
    random, shuffled."""
    distinct = max(1, n - math.floor(n * duplicates + 0.5))
    rng = random.Random(seed)
    keys = list(range(distinct)) + [rng.randrange(distinct) for _ in range(n - distinct)]
    rng.shuffle(keys)
    return keys, distinct


def percentile(sorted_ms: list[float], q: float) -> float:
    """The nearest-rank q-quantile, as the Go harness computes it."""
    if not sorted_ms:
        return 0.0
    i = min(max(math.ceil(q * len(sorted_ms)) - 1, 0), len(sorted_ms) - 1)
    return sorted_ms[i]


async def run_caller(url: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    async with Client.connect(url, source="/bench/python") as client:
        deadline = time.monotonic() + 30
        while name not in {t.name for t in await client.tools("acme")}:
            if time.monotonic() > deadline:
                raise SystemExit(f"the executors did not serve {name} within 30 s")
            await asyncio.sleep(0.05)

        async def closed_loop(
            run_id: str, keys: list[int], latencies: list[float]
        ) -> dict[str, int]:
            answers: dict[str, int] = {}
            queue = iter(enumerate(keys))

            async def one_at_a_time() -> None:
                for call, key in queue:
                    arguments = {"flight": f"PB{key}", "request_id": f"r{call}"}
                    start = time.perf_counter()
                    try:
                        result = await client.call("acme", name, arguments, run_id=run_id)
                        kind = result.kind.value
                    except CallError as e:
                        event = getattr(e, "event", None)
                        kind = event.kind.value if event is not None else type(e).__name__
                    latencies.append((time.perf_counter() - start) * 1000)
                    answers[kind] = answers.get(kind, 0) + 1

            await asyncio.gather(*(one_at_a_time() for _ in range(args.concurrency)))
            return answers

        if args.warmup:
            await closed_loop(f"warmup_{uuid.uuid4().hex[:12]}", list(range(args.warmup)), [])
        keys, distinct = plan_keys(args.calls, args.duplicates, args.seed)
        latencies: list[float] = []
        start = time.perf_counter()
        answers = await closed_loop(f"pybench_{uuid.uuid4().hex[:12]}", keys, latencies)
        elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "calls": args.calls,
        "answered": len(latencies),
        "answers": answers,
        "distinct_keys": distinct,
        "warmup": args.warmup,
        "concurrency": args.concurrency,
        "elapsed_seconds": elapsed,
        "calls_per_second": len(latencies) / elapsed if elapsed > 0 else 0.0,
        "latency_ms": {
            "p50": percentile(latencies, 0.50),
            "p99": percentile(latencies, 0.99),
            "max": percentile(latencies, 1.0),
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", choices=("worker", "caller"))
    p.add_argument("url")
    p.add_argument("tool")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--duplicates", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.mode == "worker":
        asyncio.run(serve_worker(args.url, args.tool))
        return
    report = asyncio.run(run_caller(args.url, args.tool, args))
    json.dump(report, sys.stdout)
    print()


if __name__ == "__main__":
    main()
