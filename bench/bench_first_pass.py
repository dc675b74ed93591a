"""A new job's first pass on an operator that is not saturated: how long it holds a worker,
and how soon the job shows its Created condition.

``make bench``'s bursts run the operator at its client's rate limit, where the order of a
pass's requests changes little. A job submitted to an idle operator (the usual case between
bursts) is bound by round trips instead: its first pass creates a probe, then the rest of its
objects, and writes its status. This runs the TFJob controller in this process against the
bench's cluster (``suite.Cluster``) at QPS 200 / burst 400, submits ``--jobs`` TFJobs of the
bench's shape (1 PS + 3 workers: 8 objects) one at a time, each once the previous one's first
pass has ended, and prints the medians and 90th percentiles of:

* ``pass``: the first pass, from the worker taking the job to the pass's end (every object
  created, the status written);
* ``created``: from the job's creation (the driver's create returning) to its first status
  write's answer (the Created condition stored).

Run::

    uv run --frozen --group bench python bench/bench_first_pass.py --jobs 40
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import suite  # bench/ is the script's directory, so on its path

from jobcontroller.controller import reconciler, status
from jobcontroller.testing.operator import running
from tf_operator.controller import TFJobController

Obj = dict[str, Any]


class Clock:
    """Wraps the reconcile and the status write to time each job's first pass and write."""

    def __init__(self) -> None:
        self.passes: dict[str, float] = {}
        self.written: dict[str, float] = {}
        self.first_pass_done: dict[str, asyncio.Event] = {}

    def install(self) -> None:
        reconcile_job = reconciler.Reconciler._reconcile_job
        write = status.StatusWriter.write
        clock = self

        async def timed_pass(self: Any, key: str, raw: Obj) -> float | None:
            began = time.monotonic()
            try:
                return await reconcile_job(self, key, raw)
            finally:
                if key not in clock.passes:
                    clock.passes[key] = time.monotonic() - began
                    clock.first_pass_done.setdefault(key, asyncio.Event()).set()

        async def timed_write(self: Any, job: Obj, doc: Any) -> bool:
            done = await write(self, job, doc)
            meta = job["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            if done and key not in clock.written:
                clock.written[key] = time.monotonic()
            return done

        reconciler.Reconciler._reconcile_job = timed_pass  # type: ignore[method-assign]
        status.StatusWriter.write = timed_write  # type: ignore[method-assign]


def _summary(name: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"{name:8s} median {statistics.median(ms):6.1f} ms   p90 {p90:6.1f} ms"


async def main(jobs: int) -> None:
    clock = Clock()
    clock.install()
    created: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, suite.Cluster(Path(tmp)) as cluster:
        kubeconfig = str(cluster.user("operator"))
        async with (
            suite.driver(cluster, suite.OUR_CRDS) as kube,
            running(kubeconfig, TFJobController(), qps=200, burst=400),
        ):
            for i in range(jobs):
                name = f"tf-{i:03d}"
                key = f"{suite.NS}/{name}"
                done = clock.first_pass_done.setdefault(key, asyncio.Event())
                await kube.create(suite.TFJOBS, suite.tfjob(name, 3), namespace=suite.NS)
                created[key] = time.monotonic()
                await asyncio.wait_for(done.wait(), timeout=60)
                await asyncio.sleep(0.2)  # its pods' first events, before the next job
    keys = [k for k in created if k in clock.written][2:]  # the first two warm the client
    print(f"{len(keys)} TFJobs (1 PS + 3 workers), one at a time, QPS 200 / burst 400:")
    print(_summary("pass", [clock.passes[k] for k in keys]))
    print(_summary("created", [clock.written[k] - created[k] for k in keys]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    asyncio.run(main(parser.parse_args().jobs))
