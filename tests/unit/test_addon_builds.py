"""Finding the add-on controllers' builds (Kueue, JobSet): a wrong override says what it lacks,
and the cache's newest complete build wins over an incomplete one (a build cut short leaves a
directory without its manifests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobcontroller.testing.jobset import JobSetNotFound, find_jobset
from jobcontroller.testing.kueue import KueueNotFound, find_kueue


def _build(directory: Path, binary: str, *, complete: bool = True, mtime: float = 0) -> Path:
    directory.mkdir(parents=True)
    exe = directory / binary
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    if complete:
        (directory / "crd").mkdir()
        (directory / "webhook.yaml").write_text("")
    if mtime:
        os.utime(directory, (mtime, mtime))
    return directory


def test_an_override_without_the_manifests_is_refused_with_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partial = _build(tmp_path / "js", "jobset", complete=False)
    monkeypatch.setenv("JOBCONTROLLER_JOBSET_BIN", str(partial))
    with pytest.raises(JobSetNotFound, match=r"JOBCONTROLLER_JOBSET_BIN=.* lacks jobset, crd/"):
        find_jobset()
    monkeypatch.setenv("JOBCONTROLLER_KUEUE_BIN", str(partial))
    with pytest.raises(KueueNotFound, match=r"JOBCONTROLLER_KUEUE_BIN=.* lacks kueue, crd/"):
        find_kueue()


def test_the_newest_complete_build_in_the_cache_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBCONTROLLER_JOBSET_BIN", raising=False)
    monkeypatch.setenv("JOBCONTROLLER_CACHE", str(tmp_path))
    _build(tmp_path / "bin" / "jobset-0.11.0", "jobset", mtime=1_000)
    newest = _build(tmp_path / "bin" / "jobset-0.12.0", "jobset", mtime=2_000)
    _build(tmp_path / "bin" / "jobset-0.13.0", "jobset", complete=False, mtime=3_000)
    assert find_jobset() == newest
