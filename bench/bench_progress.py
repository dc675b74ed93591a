"""The TrainJob progress endpoint under chatty reporters: what reaches the API server.

Run with ``uv run python bench/bench_progress.py``; takes about ten seconds. Numbers only.

The real endpoint (HTTPS, its own certificate, the token authorizer with its cache, the
checks, the per-TrainJob write bound) on loopback, with a stand-in API client that answers the
first TokenReview and pod read and counts the status patches. Reporters post as fast as they
can, each to its own TrainJob, for a few seconds; the table shows reports handled per second,
their latency, and the API calls they cost: one review and one pod read per token, and one
status write per TrainJob per interval whatever the report rate.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import resource
import ssl
import statistics
import time
from typing import Any

import aiohttp
import structlog

from jobcontroller import Resource
from jobcontroller.controller.progressauth import TokenAuthorizer
from jobcontroller.controller.progressserver import ProgressServer
from jobcontroller.runtime.progressflags import ProgressSettings
from jobcontroller.runtime.servingcert import new_serving_cert
from trainer_operator.progress import TRAINJOB, status_path, token_audience

Obj = dict[str, Any]
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
SECONDS = 3.0


class _Api:
    """Answers reviews and pod reads as the API server would; counts every call."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {"tokenreviews": 0, "pods": 0, "status patches": 0}

    async def create(self, resource: Resource, body: Obj, **_: Any) -> Obj:
        self.calls["tokenreviews"] += 1
        pod = _claims(body["spec"]["token"])["pod"]
        return {
            "status": {
                "authenticated": True,
                "user": {
                    "username": "system:serviceaccount:ns:trainer",
                    "extra": {
                        "authentication.kubernetes.io/pod-name": [pod],
                        "authentication.kubernetes.io/pod-uid": [f"uid-{pod}"],
                    },
                },
            }
        }

    async def get(self, resource: Resource, name: str, **_: Any) -> Obj:
        self.calls["pods"] += 1
        return {"metadata": {"name": name, "uid": f"uid-{name}"}}

    async def merge_patch(self, *_: Any, **__: Any) -> Obj:
        self.calls["status patches"] += 1
        return {}

    async def close(self) -> None:
        pass


def _b64(doc: Obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()


def _token(name: str) -> str:
    claims = {"aud": [token_audience("ns", name)], "exp": time.time() + 3600, "pod": f"{name}-0"}
    return f"{_b64({'alg': 'RS256'})}.{_b64(claims)}.sig"


def _claims(token: str) -> Obj:
    part = token.split(".")[1]
    claims: Obj = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return claims


async def _reporter(
    session: aiohttp.ClientSession, url: str, token: str, ctx: ssl.SSLContext, out: list[float]
) -> dict[int, int]:
    codes: dict[int, int] = {}
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.perf_counter() + SECONDS
    step = 0
    while time.perf_counter() < deadline:
        step += 1
        body = {
            "trainerStatus": {
                "progressPercentage": step % 101,
                "metrics": [{"name": "loss", "value": f"{1 / step:.6f}"}],
            }
        }
        start = time.perf_counter()
        async with session.post(url, json=body, headers=headers, ssl=ctx) as resp:
            await resp.read()
            codes[resp.status] = codes.get(resp.status, 0) + 1
        out.append(time.perf_counter() - start)
    return codes


async def _run(trainjobs: int, per_job: int) -> None:
    api = _Api()
    jobs = {f"tj-{i}": {"metadata": {"name": f"tj-{i}"}} for i in range(trainjobs)}
    settings = ProgressSettings(port=0, bind_address="127.0.0.1", extra_hosts=("localhost",))
    server = ProgressServer(
        settings=settings,
        api=api,  # type: ignore[arg-type]  # a stand-in answering the calls the endpoint makes
        authorizer=TokenAuthorizer(api=api),  # type: ignore[arg-type]  # the same stand-in
    )
    server.add_kind(
        TRAINJOB,
        resource=TRAINJOBS,
        current=lambda ns, name: jobs.get(name),
        pod_check=lambda *_: True,
    )
    cert = new_serving_cert(hosts=settings.hosts, now=dt.datetime.now(dt.UTC))
    await server.start(cert)
    ctx = ssl.create_default_context(cadata=cert.ca_pem)
    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(
                _reporter(
                    session,
                    f"https://localhost:{server.port}{status_path('ns', name)}",
                    _token(name),
                    ctx,
                    latencies,
                )
                for name in jobs
                for _ in range(per_job)
            )
        )
        seconds = time.perf_counter() - started
    await server.stop()
    codes: dict[int, int] = {}
    for r in results:
        for code, n in r.items():
            codes[code] = codes.get(code, 0) + n
    total = sum(codes.values())
    q = statistics.quantiles(latencies, n=100)
    calls = ", ".join(f"{k} {v}" for k, v in api.calls.items())
    print(
        f"{trainjobs:>9}{per_job:>9}{total / seconds:>11,.0f}{q[49] * 1000:>9.1f}"
        f"{q[98] * 1000:>9.1f}  {dict(sorted(codes.items()))}  API: {calls}"
    )


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"{SECONDS:g} s of reports as fast as they go; write interval 5 s")
    print(f"{'trainjobs':>9}{'pods/tj':>9}{'reports/s':>11}{'p50 ms':>9}{'p99 ms':>9}  codes")
    for trainjobs, per_job in ((1, 1), (1, 16), (50, 2)):
        asyncio.run(_run(trainjobs, per_job))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
