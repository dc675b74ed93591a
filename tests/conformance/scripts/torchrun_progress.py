"""A TrainJob's torch training loop that reports its progress: rank 0 sends each step's
progress and loss to the operator with the stdlib helper (progress_report.py, mounted beside
this script) through the env the operator gave the pod, then checks that the endpoint refuses a
report without a token (401) and an oversized one (413)."""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from progress_report import ProgressReporter

STEPS = 6

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
reporter = ProgressReporter(min_interval=0.0)
if rank == 0:
    print(f"PROGRESS enabled={reporter.enabled} url={reporter.url}", flush=True)
w = torch.zeros(1)
for step in range(1, STEPS + 1):
    grad = torch.tensor([float(rank + step)])
    dist.all_reduce(grad)
    w -= 0.01 * grad / world
    loss = float((w - 1.0).pow(2).item())
    if rank == 0:
        sent = reporter.step(step, STEPS, metrics={"loss": f"{loss:.4f}", "step": step})
        print(f"PROGRESS step={step} sent={sent} status={reporter.last_status}", flush=True)
    time.sleep(1)


def refused(body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(reporter.url, data=body, method="POST", headers=headers)
    context = ssl.create_default_context(cafile=reporter.ca_path)
    try:
        urllib.request.urlopen(request, timeout=5, context=context)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        print(f"REFUSED? {exc!r}", flush=True)
        return -1
    return 200


if rank == 0:
    small = json.dumps({"trainerStatus": {"progressPercentage": 1}}).encode()
    print(f"REFUSED unauthenticated {refused(small, {})}", flush=True)
    with open(reporter.token_path) as f:
        auth = {"Authorization": f"Bearer {f.read().strip()}"}
    print(f"REFUSED oversized {refused(b' ' * (1 << 17), auth)}", flush=True)
dist.barrier()
dist.destroy_process_group()
