"""Why an MPIJob is reconciled as often as it is: each pass, what it did and what woke it.

CPU per MPIJob in ``make bench`` is mostly work per reconcile and per watch event. This runs
the MPIJob controller in this process against the bench's cluster (``suite.Cluster``: etcd,
API server, scheduler, controller-manager, kwok), submits ``--jobs`` MPIJobs of the bench's
shape (2 workers, a launcher that runs 2 s) at the bench's QPS 20 and burst 30, waits until all
are done plus 3 s, and prints, per job:

* reconciles, by what the pass did: the actions it planned (kinds), and whether the status it
  derived differs from the stored one (written, or held back by the status writer);
* for the passes that planned nothing, the updates of cached objects that came since the job's
  previous pass (resource and changed fields), i.e. what woke them;
* the updates the informers delivered, by resource and changed fields.

It observes through wrappers around ``Telemetry.log_plan`` (called once per pass with the
plan) and ``Informer._emit_update``; nothing else is changed. Run::

    uv run --frozen --group bench python bench/bench_reconciles.py --jobs 20
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import tempfile
import time
from pathlib import Path
from typing import Any

import suite  # bench/ is the script's directory, so on its path

from jobcontroller.controller import telemetry
from jobcontroller.runtime import informer
from jobcontroller.testing.operator import running
from mpi_operator.controller import MPIJobController

Obj = dict[str, Any]


def _changed(old: Obj, new: Obj, prefix: str = "") -> list[str]:
    """The dotted paths where ``old`` and ``new`` differ (resourceVersion left out)."""
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        if key == "resourceVersion":
            continue
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += _changed(a, b, f"{prefix}{key}.")
        else:
            out.append(prefix + key)
    return out


def _job_key(obj: Obj) -> str | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "MPIJob":
            return f"{meta.get('namespace')}/{ref.get('name')}"
    name = (meta.get("labels") or {}).get("training.kubeflow.org/job-name")
    if name:
        return f"{meta.get('namespace')}/{name}"
    if obj.get("kind") == "MPIJob":
        return f"{meta.get('namespace')}/{meta.get('name')}"
    return None


class Recorder:
    def __init__(self) -> None:
        self.passes: collections.Counter[tuple[Any, ...]] = collections.Counter()
        self.idle_wakers: collections.Counter[tuple[Any, ...]] = collections.Counter()
        self.updates: collections.Counter[tuple[str, tuple[str, ...]]] = collections.Counter()
        self._since: dict[str, list[tuple[str, tuple[str, ...]]]] = collections.defaultdict(list)

    def install(self) -> None:
        log_plan = telemetry.Telemetry.log_plan
        emit_update = informer.Informer._emit_update
        recorder = self

        def observed_plan(self: Any, raw: Obj, observed: Any, result: Any, **kw: Any) -> None:
            recorder.on_plan(raw, result)
            log_plan(self, raw, observed, result, **kw)

        async def observed_update(self: Any, old: Obj, new: Obj) -> None:
            recorder.on_update(self.name.split(".")[0], old, new)
            await emit_update(self, old, new)

        telemetry.Telemetry.log_plan = observed_plan  # type: ignore[method-assign]
        informer.Informer._emit_update = observed_update  # type: ignore[method-assign]

    def on_update(self, resource: str, old: Obj, new: Obj) -> None:
        fields = tuple(_changed(old, new))
        self.updates[(resource, fields)] += 1
        key = _job_key(new)
        if key is not None:
            self._since[key].append((resource, fields))

    def on_plan(self, raw: Obj, result: Any) -> None:
        meta = raw["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        actions = collections.Counter(
            f"{type(a).__name__}:{getattr(a, 'kind', '')}" for a in result.actions
        )
        status = result.status is not None and result.status.to_dict() != (raw.get("status") or {})
        wakers = tuple(self._since.pop(key, ()))
        self.passes[(tuple(sorted(actions.items())), status)] += 1
        if not actions and not status:
            self.idle_wakers[wakers] += 1


async def main(jobs: int) -> None:
    recorder = Recorder()
    recorder.install()
    with tempfile.TemporaryDirectory() as tmp, suite.Cluster(Path(tmp)) as cluster:
        kubeconfig = str(cluster.user("operator"))
        async with (
            suite.driver(cluster, suite.OUR_CRDS) as kube,
            running(kubeconfig, MPIJobController(), qps=20, burst=30),
        ):
            started = time.monotonic()
            for i in range(jobs):
                await kube.create(suite.MPIJOBS, suite.mpijob(f"job-{i}", 2), namespace=suite.NS)
            while True:
                items, _ = await kube.list(suite.MPIJOBS, namespace=suite.NS)
                if len(items) == jobs and all(suite._done(j) for j in items):
                    break
                await asyncio.sleep(0.5)
            done = time.monotonic() - started
            await asyncio.sleep(3)
    total = sum(recorder.passes.values())
    print(f"{jobs} MPIJobs done in {done:.1f} s; {total / jobs:.2f} reconciles per job")
    print("\nreconciles per job, by what the pass planned (actions; status differs):")
    for (actions, status), n in recorder.passes.most_common():
        print(f"  {n / jobs:5.2f}  {dict(actions) or '-'}; {status}")
    print("\npasses that planned nothing, per job, by the updates that came before them:")
    for wakers, n in recorder.idle_wakers.most_common(12):
        print(f"  {n / jobs:5.2f}  {list(wakers) or 'a timer'}")
    print("\nupdates delivered, per job, by resource and changed fields:")
    for (resource, fields), n in recorder.updates.most_common(15):
        print(f"  {n / jobs:5.2f}  {resource}: {', '.join(fields) or '(resourceVersion only)'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    asyncio.run(main(parser.parse_args().jobs))
