"""Write the CRDs of every kind served to manifests/base/crds: each job controller's ``crd()``,
and the Kubeflow Trainer v2 kinds (trainer_operator.crd: TrainJob and the two runtimes).

uv run python hack/gen-crds.py           # regenerate
uv run python hack/gen-crds.py --check   # exit 1 if a committed manifest has drifted
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from jobcontroller.api.crd import crd_to_yaml
from jobcontroller.manifests import crds
from trainer_operator.crd import crds as trainer_crds
from training_operator.__main__ import build_controllers

CRD_DIR = Path(__file__).resolve().parent.parent / "manifests" / "base" / "crds"


def rendered() -> dict[Path, str]:
    """Every CRD manifest path with the content it should have."""
    out: dict[Path, str] = {}
    # The CRDs `<operator> crd` prints: each controller's own (one path for every operator).
    # The trainer kinds have no controller yet; their CRDs come from their models alone.
    for crd in [*crds(build_controllers()), *trainer_crds()]:
        spec = crd["spec"]
        out[CRD_DIR / f"{spec['group']}_{spec['names']['plural']}.yaml"] = crd_to_yaml(crd)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    drifted = 0
    for path, text in rendered().items():
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        if args.check:
            drifted += 1
            diff = difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=str(path),
                tofile=f"{path} (generated)",
            )
            sys.stdout.writelines(diff)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if drifted:
        print(f"{drifted} CRD manifest(s) out of date: run `uv run python hack/gen-crds.py`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
