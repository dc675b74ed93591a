"""Start to ready of the all-in-one operator, repeated on one control plane.

``make bench``'s ``idle`` scenario measures start to ready once per run, on a cluster that has
just started, so one figure carries the machine's noise. This starts ``training-operator`` the
way that scenario does (leader election on, QPS 20/30, our CRDs installed) ``--runs`` times
against one control plane and prints, for each run and as medians:

- ``wall``: seconds from exec to the first 200 from ``/readyz`` (caches synced, Lease held),
  polled every 10 ms: the ``idle`` scenario's "start to ready";
- ``cpu``: the process's CPU seconds (user + system, ``/proc/<pid>/stat``) at that moment,
  which other agents' load on the machine does not inflate as it does the wall time;
- ``import``: CPU seconds of ``import training_operator.__main__`` alone, in a fresh
  interpreter (``time.process_time()``), and the top modules by ``-X importtime``.

Every run has its own Lease namespace, so no run waits for the previous one's Lease.

Usage: ``uv run python bench/bench_startup.py [--runs 7] [--json bench/results/startup.json]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from jobcontroller.runtime.kube import NAMESPACES, KubeApi
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.operator import install_crds
from jobcontroller.testing.processes import OperatorProcess

ROOT = Path(__file__).resolve().parents[1]
CRDS = sorted((ROOT / "manifests" / "base" / "crds").glob("*.yaml"))
IMPORT = "import time; t = time.process_time(); import training_operator.__main__; "
IMPORT += "print(time.process_time() - t)"
KINDS = ["tf", "pytorch", "mpi", "xgboost", "paddle", "jax", "trainer"]
IMPORT_ALL = IMPORT.replace(
    "import training_operator.__main__; ",
    "import training_operator.__main__, "
    + ", ".join(f"{kind}_operator.controller" for kind in KINDS)
    + "; ",
)
NO_RICH = "import sys; sys.modules['rich'] = None; "


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def one_run(kubeconfig: Path, workdir: Path, run: int, env: dict[str, str]) -> tuple[float, float]:
    op = OperatorProcess(
        "training-operator",
        kubeconfig=kubeconfig,
        log=workdir / f"op-{run}.log",
        args=[
            "--leader-elect",
            f"--leader-election-namespace=lease-{run}",
            "--kube-api-qps=20",
            "--kube-api-burst=30",
        ],
        env=env,
    )
    started = time.monotonic()
    op.start()
    try:
        while not ready(op.health_port):
            if not op.alive:
                raise RuntimeError(op.log.read_text()[-3000:])
            if time.monotonic() - started > 120:
                raise RuntimeError("not ready in 120 s")
            time.sleep(0.01)
        wall = time.monotonic() - started
        return wall, cpu_seconds(op.pid)
    finally:
        op.close()


def bytecode_env() -> dict[str, str]:
    """Compile every module once into a cache of its own, as the image does at build time
    (``UV_COMPILE_BYTECODE``), and the environment that makes a process read it. Without it, a
    shell with ``PYTHONDONTWRITEBYTECODE=1`` (this machine's) compiles every module from source
    at each start: most of the CPU to ready."""
    prefix = Path.home() / ".cache" / "jobcontroller" / "pycache"
    env = {"PYTHONPYCACHEPREFIX": str(prefix)}
    dirs = [str(Path(p)) for p in sys.path if p and Path(p).is_dir()]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "1", *dirs],
        check=False,
        capture_output=True,
        env={**os.environ, **env, "PYTHONDONTWRITEBYTECODE": ""},
    )
    return env


def import_cpu(runs: int, env: dict[str, str], code: str = IMPORT) -> list[float]:
    out = []
    for _ in range(runs):
        text = subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        ).stdout
        out.append(float(text))
    return out


def top_imports(count: int, env: dict[str, str]) -> list[tuple[str, int]]:
    """Import time (µs of ``-X importtime``'s self column) summed by top-level package."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import training_operator.__main__"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    ).stderr
    own: dict[str, int] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.split(":", 1)[1].split("|")
        root = name.strip().split(".")[0]
        own[root] = own.get(root, 0) + int(self_us)
    return sorted(own.items(), key=lambda kv: -kv[1])[:count]


async def prepare(plane: ControlPlane, runs: int) -> None:
    async with await KubeApi.from_config(kubeconfig=str(plane.kubeconfig), qps=500) as kube:
        await install_crds(kube, CRDS)
        for run in range(runs):
            await kube.create(NAMESPACES, {"metadata": {"name": f"lease-{run}"}})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--source",
        action="store_true",
        help="no bytecode cache: every module compiled at each start (PYTHONDONTWRITEBYTECODE)",
    )
    args = parser.parse_args()
    env = {"PYTHONDONTWRITEBYTECODE": "1"} if args.source else bytecode_env()
    imports = import_cpu(args.runs, env)
    # Every kind's package, as a start with all kinds enabled imports them; and the same
    # without rich, as the image (structlog imports rich for its console renderer when it can).
    imports_all = import_cpu(args.runs, env, IMPORT_ALL)
    imports_all_no_rich = import_cpu(args.runs, env, NO_RICH + IMPORT_ALL)
    tops = top_imports(12, env)
    walls, cpus = [], []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp, ControlPlane() as plane:
        asyncio.run(prepare(plane, args.runs))
        for run in range(args.runs):
            wall, cpu = one_run(plane.kubeconfig, Path(tmp), run, env)
            walls.append(wall)
            cpus.append(cpu)
            print(f"run {run}: ready in {wall:.3f} s wall, {cpu:.2f} s CPU", flush=True)
    result: dict[str, Any] = {
        "label": args.label,
        "bytecode": not args.source,
        "runs": args.runs,
        "ready_wall_s": [round(w, 3) for w in walls],
        "ready_cpu_s": cpus,
        "import_cpu_s": [round(i, 3) for i in imports],
        "median_ready_wall_s": round(statistics.median(walls), 3),
        "median_ready_cpu_s": round(statistics.median(cpus), 3),
        "median_import_cpu_s": round(statistics.median(imports), 3),
        "import_all_kinds_cpu_s": [round(i, 3) for i in imports_all],
        "median_import_all_kinds_cpu_s": round(statistics.median(imports_all), 3),
        "import_all_kinds_without_rich_cpu_s": [round(i, 3) for i in imports_all_no_rich],
        "median_import_all_kinds_without_rich_cpu_s": round(
            statistics.median(imports_all_no_rich), 3
        ),
        "top_imports_self_ms_by_package": {name: round(us / 1000, 1) for name, us in tops},
    }
    print(f"median: ready {result['median_ready_wall_s']} s wall, ", end="")
    print(f"{result['median_ready_cpu_s']} s CPU; import {result['median_import_cpu_s']} s CPU")
    print(
        f"import of every kind: {result['median_import_all_kinds_cpu_s']} s CPU, "
        f"{result['median_import_all_kinds_without_rich_cpu_s']} s without rich"
    )
    print("import self time by top-level package (ms):")
    for name, ms in result["top_imports_self_ms_by_package"].items():
        print(f"  {name:24} {ms:8.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
