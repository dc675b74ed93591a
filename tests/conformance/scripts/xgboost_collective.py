"""A distributed XGBoost worker on the env the operator wrote: a TrainJob's xgboost policy
writes DMLC_*, an XGBoostJob (v1) MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which are
mapped onto them here as v1's examples do. Worker 0 starts the Rabit tracker where
DMLC_TRACKER_URI points and every worker joins it; an all-reduce of the ranks must give
0+1+...+(n-1) everywhere, then histogram trees are trained on each worker's own shard of
y = 3*x0 - 2*x1 and, the split statistics being all-reduced, every worker ends with the same
model, which fits data none of them saw."""

import hashlib
import os
import socket
import time

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

if "DMLC_TASK_ID" not in os.environ:
    v1 = {
        "DMLC_TRACKER_URI": "MASTER_ADDR",
        "DMLC_TRACKER_PORT": "MASTER_PORT",
        "DMLC_TASK_ID": "RANK",
        "DMLC_NUM_WORKER": "WORLD_SIZE",
    }
    os.environ.update({dmlc: os.environ[name] for dmlc, name in v1.items()})
task = int(os.environ["DMLC_TASK_ID"])
workers = int(os.environ["DMLC_NUM_WORKER"])
env = {k: os.environ[k] for k in ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID")}
tracker = None
if task == 0:
    # Ranks follow DMLC_TASK_ID (sortby="task"), so rank r is the pod of completion index r.
    tracker = RabitTracker(
        host_ip="0.0.0.0", n_workers=workers, port=int(env["DMLC_TRACKER_PORT"]), sortby="task"
    )
    tracker.start(workers)

# A pod may start before the tracker's pod has an address in DNS (Rabit gives up on a name
# that does not resolve), and before the tracker listens (Rabit retries that).
deadline = time.monotonic() + 120
while True:
    try:
        socket.getaddrinfo(env["DMLC_TRACKER_URI"], None)
        break
    except socket.gaierror:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
with collective.CommunicatorContext(**env, DMLC_WORKER_CONNECT_RETRY="60"):
    rank, world = collective.get_rank(), collective.get_world_size()
    total = collective.allreduce(np.array([float(rank)]), collective.Op.SUM)[0]
    expected = world * (world - 1) / 2
    print(
        f"ALLREDUCE rank={rank} task={task} world={world} sum={total:g} expected={expected:g}",
        flush=True,
    )
    if total != expected:
        raise SystemExit(f"all-reduce gave {total}, expected {expected}")

    def data(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.random.default_rng(seed).uniform(-1, 1, size=(n, 2))
        return x, 3 * x[:, 0] - 2 * x[:, 1]

    x, y = data(100 + rank, 2000)
    params = {"tree_method": "hist", "max_depth": 4, "eta": 0.3, "nthread": 1}
    model = xgb.train(params, xgb.DMatrix(x, label=y), num_boost_round=60)
    x_test, y_test = data(999, 500)
    rmse = float(np.sqrt(np.mean((model.predict(xgb.DMatrix(x_test)) - y_test) ** 2)))
    digest = hashlib.sha256(model.save_raw("json")).hexdigest()[:16]
    print(f"TRAINED rank={rank} test_rmse={rmse:.4f} model={digest}", flush=True)

if tracker is not None:
    tracker.join()
