"""``kfjob migrate`` on the real node: examples/real's PyTorchJob (DDP over gloo, the script
reading v1's MASTER_ADDR/RANK/WORLD_SIZE) migrated to a TrainJob and its TrainingRuntime,
applied as ``kfjob migrate`` prints them, and run by the training-operator and JobSet on the
real node: the same script, unchanged, forms its process group from the env the migration
carried over and trains to the same result as the PyTorchJob does (test_pytorch.py)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path

import pytest
import yaml
from conftest import RealCluster
from realpods import wait_default_service_account
from test_pytorch import scripts_configmap
from test_trainjob import TRAINING_RUNTIMES, TRAINJOBS, LogKeeper, is_true

from jobcontroller.runtime.apitypes import EVENTS
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.waiting import wait_for
from kfjob.migrate import migrate

ROOT = Path(__file__).resolve().parents[2]


async def test_migrated_pytorchjob_trains_unchanged_as_a_trainjob(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    await scripts_configmap(kube, namespace, "ddp.py")
    doc = yaml.safe_load((ROOT / "examples/real/pytorchjob-ddp.yaml").read_text())
    m = migrate(doc)
    assert m.warnings == (), m.warnings
    if m.runtime is not None:
        await kube.create(TRAINING_RUNTIMES, m.runtime, namespace=namespace)
    await kube.create(TRAINJOBS, m.trainjob, namespace=namespace)
    keeper = LogKeeper(kube, namespace, m.name)
    reading = asyncio.create_task(keeper.run())
    try:
        done = await wait_for(
            kube,
            TRAINJOBS,
            m.name,
            namespace=namespace,
            until=lambda o: is_true(o, "Complete") or is_true(o, "Failed"),
            timeout=600,
        )
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
    await keeper.read()
    outputs = keeper.outputs
    if done is None or not is_true(done, "Complete"):
        events, _ = await kube.list(EVENTS, namespace=namespace)
        seen = [f"{e['involvedObject']['name']}: {e['reason']} {e.get('message')}" for e in events]
        pytest.fail(f"{(done or {}).get('status')}\n{outputs}\n" + "\n".join(seen))
    for pod_name, out in sorted(outputs.items()):
        print(f"--- {pod_name}\n{out}")
    # The PyTorchJob's three replicas (Master + 2 Workers) are three nodes, ranks 0..2.
    assert m.trainjob["spec"]["trainer"]["numNodes"] == 3
    text = "\n".join(outputs.values())
    ranks = sorted(re.findall(r"ALLREDUCE rank=(\d) world=3 sum=6 expected=6", text))
    assert ranks == ["0", "1", "2"], outputs
    trained = re.findall(r"TRAINED rank=\d first_loss=\S+ final_loss=\S+ w=(\S+) b=(\S+)", text)
    assert len(trained) == 3, outputs
    for w, b in trained:
        assert abs(float(w) - 3) < 0.1 and abs(float(b) - 2) < 0.1, outputs
