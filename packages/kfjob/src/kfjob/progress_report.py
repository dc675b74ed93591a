"""Report a job's training progress from inside its pods (a TrainJob's trainer, or any pod of a
TFJob, PyTorchJob, MPIJob, XGBoostJob, PaddleJob or JAXJob), with the standard library only:
copy this one file into a training image, or import ``kfjob.progress_report``.

The operator gives every such container ``KUBEFLOW_TRAINER_SERVER_URL`` (the job's own URL),
``KUBEFLOW_TRAINER_SERVER_TOKEN`` (a file: the pod's projected token, renewed by the kubelet)
and ``KUBEFLOW_TRAINER_SERVER_CA_CERT`` (a file: the endpoint's CA), the names Kubeflow Trainer
uses, whatever the kind. Outside such a pod, or with the endpoint turned off, reporting does
nothing.

In a torch loop, from rank 0 only (every rank may report, but one voice is enough)::

    from progress_report import ProgressReporter

    reporter = ProgressReporter()
    for step in range(total_steps):
        loss = train_step()
        reporter.step(step + 1, total_steps, metrics={"loss": f"{loss:.4f}"})
    reporter.report(progress_percentage=100, estimated_remaining_seconds=0, force=True)

Reports closer together than ``min_interval`` seconds (5, as Kubeflow's SDK) are skipped
unless ``force``; the operator also writes at most one status per job per 5 s. A failed
report is written to stderr and never raised: progress must not stop training.

From a shell: ``python progress_report.py --percent 40 --remaining 300 --metric loss=0.2``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence

__all__ = ["ENV_CA_CERT", "ENV_SERVER_URL", "ENV_TOKEN", "ProgressReporter", "main"]

ENV_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"


class ProgressReporter:
    """Sends ``{"trainerStatus": {...}}`` to the TrainJob's progress endpoint."""

    def __init__(
        self,
        *,
        min_interval: float = 5.0,
        timeout: float = 5.0,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        env = os.environ if env is None else env
        self.url = env.get(ENV_SERVER_URL, "")
        self.token_path = env.get(ENV_TOKEN, "")
        self.ca_path = env.get(ENV_CA_CERT, "")
        self.min_interval = min_interval
        self.timeout = timeout
        self._clock = clock
        self._last: float | None = None
        self._started = clock()
        self._context: ssl.SSLContext | None = None
        self.last_status: int | None = None
        """The HTTP status of the last report sent (None: none sent, or no answer)."""

    @property
    def enabled(self) -> bool:
        """Whether this process runs in a TrainJob whose operator takes reports."""
        return bool(self.url and self.token_path)

    def step(
        self,
        done: int,
        total: int,
        *,
        metrics: Mapping[str, object] | None = None,
        force: bool = False,
    ) -> bool:
        """Report ``done`` of ``total`` steps; the remaining time is extrapolated from the
        time since this reporter was made."""
        if total <= 0:
            return False
        done = max(0, min(done, total))
        elapsed = self._clock() - self._started
        remaining = int(elapsed / done * (total - done)) if done else None
        return self.report(
            progress_percentage=done * 100 // total,
            estimated_remaining_seconds=remaining,
            metrics=metrics,
            force=force or done == total,
        )

    def report(
        self,
        *,
        progress_percentage: int | None = None,
        estimated_remaining_seconds: int | None = None,
        metrics: Mapping[str, object] | None = None,
        force: bool = False,
    ) -> bool:
        """Send one report; True when the operator took it (200 or 202). Skipped (False) when
        not in a reporting pod, or within ``min_interval`` of the last one unless ``force``."""
        if not self.enabled:
            return False
        now = self._clock()
        if not force and self._last is not None and now - self._last < self.min_interval:
            return False
        self._last = now
        status: dict[str, object] = {
            "lastUpdatedTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        }
        if progress_percentage is not None:
            status["progressPercentage"] = max(0, min(100, int(progress_percentage)))
        if estimated_remaining_seconds is not None:
            status["estimatedRemainingSeconds"] = max(0, int(estimated_remaining_seconds))
        if metrics:
            status["metrics"] = [
                {"name": str(k)[:64], "value": str(v)[:64]} for k, v in metrics.items()
            ]
        return self._send(json.dumps({"trainerStatus": status}).encode())

    def _send(self, body: bytes) -> bool:
        self.last_status = None
        try:
            with open(self.token_path) as f:  # re-read: the kubelet renews it
                token = f.read().strip()
            request = urllib.request.Request(
                self.url,
                data=body,
                method="POST",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(
                request, timeout=self.timeout, context=self._ssl()
            ) as response:
                self.last_status = response.status
                return True
        except urllib.error.HTTPError as exc:
            self.last_status = exc.code
            detail = exc.read(2048).decode(errors="replace")
            _warn(f"progress report refused ({exc.code}): {_message(detail)}")
        except (OSError, ValueError) as exc:
            _warn(f"progress report not sent: {exc}")
        return False

    def _ssl(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = ssl.create_default_context(cafile=self.ca_path or None)
        return self._context


def _message(detail: str) -> str:
    try:
        return str(json.loads(detail).get("message") or detail)
    except (ValueError, AttributeError):
        return detail


def _warn(text: str) -> None:
    print(f"[progress_report] {text}", file=sys.stderr, flush=True)


def _metric(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="report TrainJob progress from a trainer pod")
    parser.add_argument("--percent", type=int, help="progress, 0 to 100")
    parser.add_argument("--remaining", type=int, help="estimated seconds left")
    parser.add_argument("--metric", type=_metric, action="append", default=[], help="NAME=VALUE")
    args = parser.parse_args(argv)
    reporter = ProgressReporter()
    if not reporter.enabled:
        _warn(f"not in a TrainJob that takes reports ({ENV_SERVER_URL} is not set)")
        return 1
    sent = reporter.report(
        progress_percentage=args.percent,
        estimated_remaining_seconds=args.remaining,
        metrics=dict(args.metric),
        force=True,
    )
    return 0 if sent else 1


if __name__ == "__main__":
    sys.exit(main())
