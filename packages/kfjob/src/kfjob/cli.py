"""The ``kfjob`` command line, built on :class:`kfjob.client.JobClient`.

``kfjob render`` and ``kfjob migrate`` work offline; every other command (``kfjob ui`` too:
:mod:`kfjob.ui.command`) talks to the cluster of the usual kubeconfig resolution
(``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``, in-cluster). Output goes through
``rich`` (:mod:`kfjob.tables`): colours and the live display only on a terminal, never with
``NO_COLOR`` set; piped output is plain text, one line per change.

TrainJobs (``trainer.kubeflow.org``, :mod:`kfjob.trainjobs`) are served by every command but
``render`` (``migrate`` writes them), with the trainer's reported progress as a bar.

Exit status: 0 success (a job that Succeeded, or a TrainJob Complete, for ``wait`` and
``submit --wait``), 1 the job Failed or render refused it, 2 bad usage, 3 a wait timed out, 4 an
API error (not found, forbidden, refused at admission).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from jobcontroller.api import JobModel
from kfjob.client import (
    ApiFailure,
    JobClient,
    JobFailedError,
    NoCluster,
    Progress,
)
from kfjob.describe import describe
from kfjob.kinds import KINDS, UnknownKind, kind_for
from kfjob.migrate.command import add_migrate_command
from kfjob.render import (
    Rendered,
    RenderError,
    load_documents,
    pod_env,
    pod_rows,
    render_text,
    to_yaml,
)
from kfjob.tables import (
    duration,
    err_console,
    failure_lines,
    jobs_table,
    out_console,
    progress_line,
    replica_table,
    trainjob_failure_lines,
    trainjob_jobs_table,
    trainjob_progress_line,
)
from kfjob.trainjobs import (
    TrainJobFailedError,
    TrainJobProgress,
    TrainJobs,
    is_trainjob,
)
from kfjob.ui.command import add_ui_command
from trainer_operator.api import TrainJob

__all__ = ["main"]

EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT, EXIT_API = 1, 2, 3, 4


class _Usage(Exception):
    """A usage error found after parsing (an ambiguous name...)."""


# ----------------------------------------------------------------------------- commands


def _client(args: argparse.Namespace, kind: str | None = None) -> JobClient:
    return JobClient(
        config_file=args.kubeconfig,
        context=args.context,
        namespace=args.namespace,
        job_kind=kind or "PyTorchJob",
    )


def _kind_name(name: str) -> str:
    if is_trainjob(name):
        return TrainJob.KIND
    try:
        return kind_for(name).kind
    except UnknownKind as exc:
        raise UnknownKind(f"{exc}, {TrainJob.KIND}") from exc


def _resolve(client: JobClient, ref: str, kind: str | None) -> tuple[str, str]:
    """``KIND/NAME`` or ``NAME`` (with ``--kind``, or looked up across every kind, TrainJobs
    too)."""
    if "/" in ref:
        kind, _, ref = ref.partition("/")
    if kind:
        return _kind_name(kind), ref
    found = [j.kind for j in client.list(all_kinds=True) if j.name == ref]
    found += [j.KIND for j in TrainJobs(client).list(missing_ok=True) if j.name == ref]
    if not found:
        raise ApiFailure(404, f'no job named "{ref}" in namespace {client.namespace}')
    if len(found) > 1:
        raise _Usage(f"{ref} names a {' and a '.join(found)}: say which, as KIND/{ref}")
    return found[0], ref


def cmd_render(args: argparse.Namespace) -> int:
    out, err = out_console(), err_console()
    rendered: list[Rendered] = []
    for path in args.files:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        rendered += render_text(
            text,
            namespace=args.namespace or "default",
            operator_args=args.operator_args,
            source="<stdin>" if path == "-" else path,
        )
    for r in rendered:
        for note in r.notes:
            err.print(f"note: {r.kind.kind} {r.name}: {note}")
        for event in r.events:
            if event.type == "Warning":
                err.print(f"warning: {r.kind.kind} {r.name}: {event.reason}: {event.message}")
    if args.env:
        for r in rendered:
            for pod in r.pods:
                out.print(Text(f"# {pod['metadata']['name']}", style="bold"))
                for container, env in pod_env(pod).items():
                    out.print(f"  {container}:")
                    for key, value in env.items():
                        lines = value.splitlines() or [""]
                        out.print(f"    {key}={lines[0]}", markup=False)
                        for more in lines[1:]:
                            out.print(f"    {more}", markup=False)
    elif args.table:
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        for c in ("POD", "REPLICA", "INDEX", "ROLE", "PORTS", "COMMAND"):
            table.add_column(c, no_wrap=c != "COMMAND")
        for r in rendered:
            for row in pod_rows(r.objects):
                table.add_row(
                    row.pod, row.replica_type, row.index, row.role, row.ports, row.command
                )
        out.print(table)
    else:
        sys.stdout.write(to_yaml(o for r in rendered for o in r.objects))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    client = _client(args)
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    docs = load_documents(text, source=args.file)
    if args.wait and len(docs) != 1:
        raise _Usage("--wait takes a file with one job")
    created: list[JobModel[Any] | TrainJob] = []
    for doc in docs:
        job: JobModel[Any] | TrainJob
        if doc.get("kind") == TrainJob.KIND:
            served = TrainJob.api_version_string()
            if doc.get("apiVersion") != served:
                raise UnknownKind(
                    f"{doc.get('apiVersion') or '(no apiVersion)'} TrainJob is not served: "
                    f"trainer-operator serves {served} TrainJob"
                )
            job = TrainJobs(client).create(doc, namespace=args.namespace)
        else:
            job = client.create(doc, namespace=args.namespace)
        out_console().print(f"{job.KIND.lower()}.{job.GROUP}/{job.name} created")
        created.append(job)
    if not args.wait:
        return 0
    first = created[0]
    return _wait(client, first.KIND, first.name, first.namespace, args.timeout, args.interval)


def cmd_wait(args: argparse.Namespace) -> int:
    client = _client(args)
    kind, name = _resolve(client, args.job, args.kind)
    return _wait(client, kind, name, client.namespace, args.timeout, args.interval)


def _wait(
    client: JobClient, kind: str, name: str, namespace: str, timeout: float, interval: float
) -> int:
    if kind == TrainJob.KIND:
        return _wait_trainjob(client, name, namespace, timeout, interval)
    out, err = out_console(), err_console()
    live: Live | None = None
    last = ""

    def show(p: Progress) -> None:
        nonlocal last
        line = progress_line(p.job, p.elapsed)
        if live is not None:
            live.update(Group(Text(line), replica_table(p.job)))
        elif line.split("] ", 1)[1] != last:  # plain output: one line per change
            last = line.split("] ", 1)[1]
            out.print(line, markup=False)

    try:
        if out.is_terminal:
            with Live(Text("waiting..."), console=out, refresh_per_second=4) as live:
                job = client.wait_for_conditions(
                    name, namespace, kind, timeout=timeout, polling_interval=interval, callback=show
                )
        else:
            job = client.wait_for_conditions(
                name, namespace, kind, timeout=timeout, polling_interval=interval, callback=show
            )
    except JobFailedError as exc:
        for line in failure_lines(client, exc.job):
            err.print(line, markup=False)
        return EXIT_FAILED
    except TimeoutError as exc:
        err.print(f"timed out: {exc}", markup=False)
        return EXIT_TIMEOUT
    out.print(f"{job.kind} {job.namespace}/{job.name} Succeeded after {duration(job)}")
    return 0


def _wait_trainjob(
    client: JobClient, name: str, namespace: str, timeout: float, interval: float
) -> int:
    """``_wait`` for a TrainJob: its JobSet's counts and the trainer's progress bar."""
    out, err = out_console(), err_console()
    trainjobs = TrainJobs(client)
    live: Live | None = None
    last = ""

    def show(p: TrainJobProgress) -> None:
        nonlocal last
        line = trainjob_progress_line(p.job, p.elapsed)
        if live is not None:
            live.update(Group(Text(line), trainjob_jobs_table(p.job)))
        elif line.split("] ", 1)[1] != last:  # plain output: one line per change
            last = line.split("] ", 1)[1]
            out.print(line, markup=False)

    def wait() -> TrainJob:
        return trainjobs.wait(
            name, namespace=namespace, timeout=timeout, polling_interval=interval, callback=show
        )

    try:
        if out.is_terminal:
            with Live(Text("waiting..."), console=out, refresh_per_second=4) as live:
                job = wait()
        else:
            job = wait()
    except TrainJobFailedError as exc:
        for line in trainjob_failure_lines(trainjobs, exc.job):
            err.print(line, markup=False)
        return EXIT_FAILED
    except TimeoutError as exc:
        err.print(f"timed out: {exc}", markup=False)
        return EXIT_TIMEOUT
    out.print(f"TrainJob {job.namespace}/{job.name} Complete after {duration(job)}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    client = _client(args)
    jobs: list[JobModel[Any] | TrainJob] = []
    if getattr(args, "job", None):
        kind, name = _resolve(client, args.job, args.kind)
        if kind == TrainJob.KIND:
            jobs.append(TrainJobs(client).get(name))
        else:
            jobs.append(client.get(name, job_kind=kind))
    elif is_trainjob(args.kind):
        jobs += TrainJobs(client).list(all_namespaces=args.all_namespaces)
    else:
        jobs += client.list(
            job_kind=_kind_name(args.kind) if args.kind else None,
            all_kinds=args.kind is None,
            all_namespaces=args.all_namespaces,
        )
        if args.kind is None:
            jobs += TrainJobs(client).list(all_namespaces=args.all_namespaces, missing_ok=True)
            jobs.sort(
                key=lambda j: (str(j.metadata.get("creationTimestamp") or ""), j.KIND, j.name)
            )
    if args.output == "yaml":
        sys.stdout.write(to_yaml(j.to_dict() for j in jobs))
    elif args.output == "json":
        print(json.dumps([j.to_dict() for j in jobs], indent=2))
    elif not jobs:
        err_console().print(f"No jobs found in namespace {client.namespace}.")
    else:
        out_console().print(
            jobs_table(jobs, namespaces=bool(getattr(args, "all_namespaces", False)))
        )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    client = _client(args)
    kind, name = _resolve(client, args.job, args.kind)
    return describe(client, kind=kind, name=name, events=args.events)


def cmd_logs(args: argparse.Namespace) -> int:
    client = _client(args)
    kind, name = _resolve(client, args.job, args.kind)
    if kind == TrainJob.KIND:
        return _logs_trainjob(client, name, args)
    if args.follow:
        for line in client.follow_logs(
            name, None, kind, args.replica_type, args.index, args.container
        ):
            print(line, flush=True)
        return 0
    logs = client.get_logs(name, None, kind, args.replica_type, args.index, args.container)
    if not logs:
        err_console().print(f"{kind} {name} has no pods yet")
        return EXIT_API
    for text in logs.values():
        sys.stdout.write(text)
    return 0


def _logs_trainjob(client: JobClient, name: str, args: argparse.Namespace) -> int:
    """``logs`` of a TrainJob: ``-r`` names a replicated job of its JobSet (default: the
    trainer's), ``-i`` a completion index in it (default 0)."""
    trainjobs = TrainJobs(client)
    trainjobs.get(name)  # not found: exit 4 with the API server's words
    rjob, index, container = args.replica_type, args.index, args.container
    if args.follow:
        for line in trainjobs.follow_logs(
            name, replicated_job=rjob, index=index, container=container
        ):
            print(line, flush=True)
        return 0
    logs = trainjobs.get_logs(name, replicated_job=rjob, index=index, container=container)
    if not logs:
        which = f"replicated job {rjob or 'trainer'} index {index or 0}"
        none = not trainjobs.pods(name)
        err_console().print(
            f"TrainJob {name} has no pods yet" if none else f"TrainJob {name} has no pod of {which}"
        )
        return EXIT_API
    for text in logs.values():
        sys.stdout.write(text)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    client = _client(args)
    kind, name = _resolve(client, args.job, args.kind)
    if kind == TrainJob.KIND:
        TrainJobs(client).delete(name)
    else:
        client.delete(name, job_kind=kind)
    out_console().print(f"{_qualified(kind)}/{name} deleted")
    return 0


def cmd_suspend(args: argparse.Namespace) -> int:
    client = _client(args)
    kind, name = _resolve(client, args.job, args.kind)
    suspend = args.command == "suspend"
    if kind == TrainJob.KIND:
        TrainJobs(client).set_suspend(name, suspend=suspend)
    elif suspend:
        client.suspend(name, job_kind=kind)
    else:
        client.resume(name, job_kind=kind)
    out_console().print(f"{_qualified(kind)}/{name} {'suspended' if suspend else 'resumed'}")
    return 0


def _qualified(kind: str) -> str:
    """kubectl's resource.group: ``tfjob.kubeflow.org``, ``trainjob.trainer.kubeflow.org``."""
    return f"{kind.lower()}.{TrainJob.GROUP if kind == TrainJob.KIND else 'kubeflow.org'}"


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kfjob",
        description="Render, submit, follow and explain Kubeflow training jobs "
        f"({', '.join(k.kind for k in KINDS)}, {TrainJob.KIND}).",
    )
    # The connection flags work before and after the command (kfjob -n x get, kfjob get -n x).
    common = argparse.ArgumentParser(add_help=False)
    for target, default in ((parser, None), (common, argparse.SUPPRESS)):
        target.add_argument(
            "--kubeconfig",
            default=default,
            help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
        )
        target.add_argument("--context", default=default, help="kubeconfig context")
        target.add_argument(
            "-n",
            "--namespace",
            default=default,
            help="namespace (default: the manifest's, the context's, else default)",
        )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=description or help_, parents=[common])

    def job_cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p = add(name, help_)
        p.add_argument("job", metavar="[KIND/]NAME", help="the job (KIND: tfjob, pytorchjob...)")
        p.add_argument("-k", "--kind", help="the job's kind, when NAME alone is ambiguous")
        return p

    p = add(
        "render",
        "print what the operator would create for a job (offline)",
        "Print the objects the operator creates for each job in FILE (YAML, "
        "several documents allowed; - for stdin) before any pod runs, as it sends them: "
        "the operator's own planner and validation, no cluster needed. Operator flags "
        "(--gang-scheduler-name=volcano, --cluster-domain=...) go after --.",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--env", action="store_true", help="only the env of each pod's containers")
    view.add_argument(
        "--table", action="store_true", help="a table of pods: roles, ports, commands"
    )
    p.set_defaults(func=cmd_render)

    p = add("submit", "create the job(s) in FILE", "create the job(s) in FILE (- for stdin)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--wait", action="store_true", help="then wait as `kfjob wait` does")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait (default 600)")
    p.add_argument("--interval", type=float, default=1, help="seconds between looks (default 1)")
    p.set_defaults(func=cmd_submit)

    for name, help_ in (("list", "list jobs"), ("get", "show one job, or list jobs")):
        p = add(name, help_)
        if name == "get":
            p.add_argument("job", nargs="?", metavar="[KIND/]NAME")
        p.add_argument("-k", "--kind", help="only this kind (tfjob, pytorchjob...)")
        p.add_argument("-A", "--all-namespaces", action="store_true")
        p.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table")
        p.set_defaults(func=cmd_list)

    p = job_cmd("describe", "conditions, replicas, pods and recent events of a job")
    p.add_argument("--events", type=int, default=15, help="how many recent events (default 15)")
    p.set_defaults(func=cmd_describe)

    p = job_cmd("wait", "show progress until the job succeeds (exit 0) or fails (exit 1)")
    p.add_argument("--timeout", type=float, default=600, help="seconds (default 600); exit 3 after")
    p.add_argument("--interval", type=float, default=1, help="seconds between looks (default 1)")
    p.set_defaults(func=cmd_wait)

    p = job_cmd("logs", "the master pod's (a TrainJob's trainer's) log, or a given replica's")
    p.add_argument(
        "-r",
        "--replica-type",
        help="a replica type (Worker, PS...) instead of the master; for a TrainJob a "
        "replicated job of its JobSet (node, dataset-initializer...) instead of the trainer's",
    )
    p.add_argument(
        "-i", "--index", type=int, help="the replica (a TrainJob's completion) index (default 0)"
    )
    p.add_argument("-c", "--container", help="a container (default: the framework's, node)")
    p.add_argument("-f", "--follow", action="store_true", help="follow, across restarts")
    p.set_defaults(func=cmd_logs)

    p = job_cmd("delete", "delete a job (its pods and services go with it)")
    p.set_defaults(func=cmd_delete)
    p = job_cmd("suspend", "suspend a job: its pods are deleted until it is resumed")
    p.set_defaults(func=cmd_suspend)
    p = job_cmd("resume", "resume a suspended job")
    p.set_defaults(func=cmd_suspend)

    add_migrate_command(add)
    add_ui_command(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` is the operator's flags (render only).
    operator_args: list[str] = []
    if "--" in given:
        cut = given.index("--")
        given, operator_args = given[:cut], given[cut + 1 :]
    args = parser.parse_args(given)
    if operator_args and args.command != "render":
        parser.error("only render takes operator flags after --")
    args.operator_args = operator_args
    err = err_console()
    try:
        code: int = args.func(args)
    except RenderError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_FAILED
    except (_Usage, UnknownKind, NoCluster) as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_USAGE
    except ApiFailure as exc:
        err.print(f"error: {exc.message}", markup=False)
        return EXIT_API
    except OSError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_API
    except KeyboardInterrupt:
        return 130
    return code
