"""Compare our trainer CRDs with Kubeflow Trainer's own, field by field (descriptions aside).

uv run python hack/compare-trainer-crds.py [--upstream DIR] [--all]
uv run python hack/compare-trainer-crds.py --write-digest   # refresh the unit test's copy

DIR holds upstream's generated CRDs (manifests/base/crds/trainer.kubeflow.org_*.yaml of
kubeflow/trainer v2.3.0); by default they are read from the bare mirror of the repository
(/work/.mirror/kubeflow+trainer/repo, tag v2.3.0). Prints, per kind, the schema paths only one
side has and every keyword (type, format, required, enum, default, bounds, list type, CEL
rules...) that differs, then the counts. Inside the embedded Kubernetes types (pod templates,
volumes...) only differences in the set of paths are printed unless --all is given: those
subtrees are Kubernetes' own schema, converted by controller-gen upstream and from the API
server here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path("/work/.mirror/kubeflow+trainer/repo")
TAG = "v2.3.0"
DIGEST = ROOT / "tests" / "data" / "trainer-v2.3.0" / "crd-digest.json"
PLURALS = ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
KEYWORDS = (
    "type",
    "format",
    "required",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "nullable",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-validations",
)
#: Where Kubernetes' own types start (their inside is theirs, not the trainer's): a runtime's
#: Job templates and claim templates, and the core types a TrainJob embeds.
BUILTIN_PREFIXES = (
    ".spec.template.spec.replicatedJobs[].template.spec.",
    ".spec.template.spec.volumeClaimPolicies[].templates[]",
)
BUILTIN_FIELDS = (
    "metadata",
    "env[]",
    "resourcesPerNode",
    "secretRef",
    "volumes[]",
    "volumeMounts[]",
    "securityContext",
    "affinity",
    "tolerations[]",
    "schedulingGates[]",
    "imagePullSecrets[]",
)


def flatten(node: dict[str, Any], path: str = "") -> dict[str, dict[str, Any]]:
    out = {path or ".": {k: node[k] for k in KEYWORDS if k in node}}
    for name, sub in node.get("properties", {}).items():
        out.update(flatten(sub, f"{path}.{name}"))
    if isinstance(node.get("items"), dict):
        out.update(flatten(node["items"], f"{path}[]"))
    if isinstance(node.get("additionalProperties"), dict):
        out.update(flatten(node["additionalProperties"], f"{path}{{}}"))
    return out


def _rules(value: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Rules as (rule without whitespace, message or message expression)."""
    return sorted(
        ("".join(r.get("rule", "").split()), r.get("message", r.get("messageExpression", "")))
        for r in value
    )


def builtin(path: str) -> bool:
    """Is ``path`` strictly inside an embedded Kubernetes type?"""
    if path.startswith(BUILTIN_PREFIXES):
        return True
    steps = path.strip(".").replace("{}", "").split(".")
    return any(step in BUILTIN_FIELDS for step in steps[1:-1]) and steps[0] == "spec"


def upstream_crd(plural: str, directory: Path | None) -> dict[str, Any]:
    name = f"trainer.kubeflow.org_{plural}.yaml"
    if directory is not None:
        text = (directory / name).read_text()
    else:
        text = subprocess.run(
            ["git", "-C", str(MIRROR), "show", f"{TAG}:manifests/base/crds/{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    crd: dict[str, Any] = yaml.safe_load(text)
    return crd


def compare(ours: dict[str, Any], theirs: dict[str, Any], *, everything: bool) -> list[str]:
    lines: list[str] = []
    for key in ("scope", "names"):
        if ours["spec"][key] != theirs["spec"][key]:
            lines.append(f"spec.{key}: ours {ours['spec'][key]} upstream {theirs['spec'][key]}")
    [mine], [up] = ours["spec"]["versions"], theirs["spec"]["versions"]
    for key in ("name", "additionalPrinterColumns", "subresources", "served", "storage"):
        if mine.get(key) != up.get(key):
            lines.append(f"version.{key}: ours {mine.get(key)} upstream {up.get(key)}")
    a = flatten(mine["schema"]["openAPIV3Schema"])
    b = flatten(up["schema"]["openAPIV3Schema"])
    for path in sorted(a.keys() - b.keys()):
        lines.append(f"only ours:     {path}")
    for path in sorted(b.keys() - a.keys()):
        lines.append(f"only upstream: {path}")
    for path in sorted(a.keys() & b.keys()):
        if builtin(path) and not everything:
            continue
        x, y = a[path], b[path]
        for key in KEYWORDS:
            u, v = x.get(key), y.get(key)
            if key == "x-kubernetes-validations":
                u, v = _rules(u or []), _rules(v or [])
            if key == "required":
                u, v = sorted(u or []), sorted(v or [])
            if u != v:
                lines.append(f"differs:       {path} {key}: ours {u!r} upstream {v!r}")
    return lines


def digest(crd: dict[str, Any]) -> dict[str, Any]:
    """What the unit test compares: names, scope, version settings, every trainer field's
    keywords, and the paths inside Kubernetes' types (hashed: there are a thousand)."""
    [version] = crd["spec"]["versions"]
    flat = flatten(version["schema"]["openAPIV3Schema"])
    inside = sorted(path for path in flat if builtin(path))
    return {
        "names": crd["spec"]["names"],
        "scope": crd["spec"]["scope"],
        "version": {k: v for k, v in version.items() if k != "schema"},
        "fields": {path: kw for path, kw in sorted(flat.items()) if not builtin(path)},
        "builtin_paths": len(inside),
        "builtin_paths_sha256": hashlib.sha256("\n".join(inside).encode()).hexdigest(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upstream", type=Path, help="directory of upstream's CRD YAML")
    parser.add_argument("--all", action="store_true", help="also inside Kubernetes' types")
    parser.add_argument("--write-digest", action="store_true", help=f"write {DIGEST.name}")
    args = parser.parse_args(argv)
    if args.write_digest:
        digests = {p: digest(upstream_crd(p, args.upstream)) for p in PLURALS}
        DIGEST.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
        print(f"wrote {DIGEST}")
        return 0
    sys.path.insert(0, str(ROOT / "packages" / "trainer_operator" / "src"))
    from trainer_operator.crd import crds

    ours = {crd["spec"]["names"]["plural"]: crd for crd in crds()}
    for plural in PLURALS:
        theirs = upstream_crd(plural, args.upstream)
        lines = compare(ours[plural], theirs, everything=args.all)
        paths = len(flatten(ours[plural]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))
        print(f"== {plural}: {paths} schema paths ours, {len(lines)} differences")
        for line in lines:
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
