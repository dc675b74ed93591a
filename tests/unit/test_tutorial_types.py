"""docs/writing-an-operator.md's operator type-checks under ``mypy --strict`` with no ``cast``,
its hooks marked ``@override`` (mypy's ``explicit-override`` on): the base library's author API
(the generic ``JobController[ToyJob]``, its hooks, the ``jobcontroller.api`` helpers) is typed
well enough that a new framework needs none.

The tutorial's file-named code blocks (``# toy_operator/api.py`` first lines, blocks of one
file joined in order) are extracted as tests/integration/test_tutorial.py extracts them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-an-operator.md"

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_FILE_HEADER = re.compile(r"^# ([\w.-]+(?:/[\w.-]+)*)\n")


def python_files(markdown: str) -> dict[str, str]:
    files: dict[str, list[str]] = {}
    for match in _FENCE.finditer(markdown):
        block = match.group(1)
        header = _FILE_HEADER.match(block)
        if header is not None and header[1].endswith(".py"):
            files.setdefault(header[1], []).append(block[header.end() :])
    return {path: "\n".join(parts) for path, parts in files.items()}


def test_the_tutorial_operator_passes_mypy_strict_without_casts(tmp_path: Path) -> None:
    files = python_files(DOC.read_text())
    package = {p: t for p, t in files.items() if p.startswith("toy_operator/")}
    assert set(package) == {
        "toy_operator/__init__.py",
        "toy_operator/api.py",
        "toy_operator/controller.py",
        "toy_operator/__main__.py",
    }
    for path, text in files.items():
        assert not re.search(r"\bcast\b", text), f"{path} uses cast"
        assert "type: ignore" not in text, path
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    # From the temporary directory, so the repository's own mypy settings do not apply; the
    # tutorial's test is checked too (it is code readers copy).
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--enable-error-code",
            "explicit-override",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--explicit-package-bases",
            "toy_operator",
            "tests/test_toyjob.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
