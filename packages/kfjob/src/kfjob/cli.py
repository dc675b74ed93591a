"""The ``kfjob`` command line."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    raise SystemExit("kfjob: not built yet")
