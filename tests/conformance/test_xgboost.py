"""XGBoostJob (v1) with real XGBoost: the Master runs the Rabit tracker on MASTER_ADDR and
MASTER_PORT, the env the operator injects, and with 2 Workers all-reduces and trains one model
(Debian's XGBoost 1.7; the script maps the v1 env onto DMLC_* as v1's examples do)."""

from __future__ import annotations

import re

from conftest import RealCluster
from realpods import PODS, logs, real_template, wait_default_service_account
from test_pytorch import condition, finished, scripts_configmap

from jobcontroller.runtime.apitypes import Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.images import XGBOOST_REF
from jobcontroller.testing.waiting import wait_for

XGBOOSTJOBS = Resource("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs")


async def test_master_tracker_and_two_workers_allreduce_and_train_one_model(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "xgboost_collective.py")
    template = real_template(
        "xgboost", ["python3", "/scripts/xgboost_collective.py"], image=XGBOOST_REF, scripts=cm
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": "xgb"},
        "spec": {
            "xgbReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template},
            }
        },
    }
    await kube.create(XGBOOSTJOBS, job, namespace=namespace)
    done = await wait_for(
        kube, XGBOOSTJOBS, "xgb", namespace=namespace, until=finished, timeout=600
    )
    assert done is not None
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=namespace))[0]}
    outputs = {name: await logs(kube, namespace, name, "xgboost") for name in sorted(pods)}
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)
    for name, out in outputs.items():
        print(f"--- {name}\n{out}")

    assert set(pods) == {"xgb-master-0", "xgb-worker-0", "xgb-worker-1"}
    models = set()
    for name, rank in (("xgb-master-0", 0), ("xgb-worker-0", 1), ("xgb-worker-1", 2)):
        out = outputs[name]
        # RANK is the task id (Master 0, Worker i at i + 1), and the tracker ranks by it.
        assert f"ALLREDUCE rank={rank} task={rank} world=3 sum=3 expected=3" in out, out
        trained = re.search(r"TRAINED rank=\d test_rmse=([\d.]+) model=(\w+)", out)
        assert trained, out
        assert float(trained.group(1)) < 0.3, out
        models.add(trained.group(2))
    assert len(models) == 1, models
