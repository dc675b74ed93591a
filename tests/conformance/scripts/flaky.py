"""The failure path on real processes: the Worker's first run is killed by SIGKILL (exit 137,
as an OOM kill would end it); the operator's ExitCode policy recreates the pod, whose process
then joins the Master and the job ends well. The marker lives on the node (a hostPath)."""

import os
import signal
from pathlib import Path

import torch
import torch.distributed as dist

marker = Path("/marker/killed-once")
if os.environ["RANK"] != "0" and not marker.exists():
    marker.write_text("1")
    print("FLAKY: killing myself with SIGKILL", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"FLAKY-DONE rank={dist.get_rank()} sum={t.item():g}", flush=True)
dist.destroy_process_group()
