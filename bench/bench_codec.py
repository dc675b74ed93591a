"""Encode and decode cost of one pod, the standard library's json against the API codec.

A pod's watch event (a TFJob worker's pod, 1.7 KB) decoded, and the pod encoded, ``--number``
times, best of 3 (``timeit``): µs per call. Also the digit-run scan the codec does before
decoding (:mod:`jobcontroller.runtime.codec`), against the regex it replaced.

Usage: ``uv run python bench/bench_codec.py [--json bench/results/codec.json]``
"""

from __future__ import annotations

import argparse
import json
import re
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from bench_requests import pod

from jobcontroller.runtime import codec


def best_us(call: Callable[[], Any], number: int) -> float:
    return round(min(timeit.repeat(call, number=number, repeat=3)) / number * 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    body = pod("job-worker-0")
    line = json.dumps({"type": "MODIFIED", "object": body}).encode()
    table = bytes.maketrans(b"123456789", b"000000000")
    digits = re.compile(rb"\d{19}")
    calls: dict[str, Callable[[], Any]] = {
        "json.loads (watch line)": lambda: json.loads(line),
        "codec.loads (watch line)": lambda: codec.loads(line),
        "orjson.loads alone (watch line)": lambda: orjson.loads(line),
        "digit-run scan, translate (codec)": lambda: b"0" * 19 in line.translate(table),
        "digit-run scan, regex (replaced)": lambda: digits.search(line),
        "json.dumps (pod)": lambda: json.dumps(body),
        "codec.dumps (pod)": lambda: codec.dumps(body),
    }
    result: dict[str, Any] = {"line_bytes": len(line), "number": args.number, "us_per_call": {}}
    for name, call in calls.items():
        result["us_per_call"][name] = best_us(call, args.number)
        print(f"{name:36} {result['us_per_call'][name]:7.2f} µs")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
