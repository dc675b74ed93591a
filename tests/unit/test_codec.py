"""The API client's JSON codec means what the standard library's json meant, value for value."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

import pytest

from jobcontroller.runtime import codec

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "w-0", "labels": {"a": "ü"}, "resourceVersion": "12"},
    "spec": {"containers": [{"name": "c", "env": [{"name": "X", "value": '\u2028"\\'}]}]},
    "status": {"phase": "Running", "score": 0.1, "count": 3, "ok": True, "none": None},
}


@pytest.mark.parametrize(
    "value",
    [
        POD,
        {"big": 2**64 + 1, "neg": -(2**70)},
        {"float": 1e308, "small": 5e-324, "third": 1 / 3},
        {1: "int key", "s": "x"},
        [],
        "text",
    ],
)
def test_encoded_bodies_decode_to_what_json_would_send(value: Any) -> None:
    assert json.loads(codec.dumps(value)) == json.loads(json.dumps(value))


def test_non_finite_floats_are_encoded_as_json_encodes_them() -> None:
    value = {"a": math.nan, "b": [math.inf, -math.inf], "c": None}
    assert codec.dumps(value) == json.dumps(value, separators=(",", ":")).encode()


def test_values_json_refuses_are_refused() -> None:
    @dataclasses.dataclass
    class Point:
        x: int

    for value in ({"p": Point(1)}, {"s": {1, 2}}, {"o": object()}):
        with pytest.raises(TypeError):
            codec.dumps(value)


def test_enums_encode_as_their_value() -> None:
    class Phase(enum.StrEnum):
        RUNNING = "Running"

    class Color(enum.Enum):  # json refused these; orjson writes the value
        RED = "red"

    assert json.loads(codec.dumps({"phase": Phase.RUNNING, "c": Color.RED})) == {
        "phase": "Running",
        "c": "red",
    }


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(POD),
        '{"big": 184467440737095516170, "neg": -184467440737095516170}',
        '{"x": 1.5e400}',
        '{"x": NaN, "y": -Infinity}',
        '{"dup": 1, "dup": 2}',
        '"\\ud83d\\ude00"',
    ],
)
def test_decoded_values_equal_json_loads(text: str) -> None:
    got, want = codec.loads(text.encode()), json.loads(text)
    if "NaN" in text:
        assert math.isnan(got["x"]) and got["y"] == want["y"]
    else:
        assert got == want
        assert type(got) is type(want)


def test_big_integers_stay_exact() -> None:
    assert codec.loads(b'{"n": 123456789012345678901234567890}')["n"] == (
        123456789012345678901234567890
    )


@pytest.mark.parametrize("data", [b"", b"{", b'{"a": }', b"\xff\xfe"])
def test_malformed_bodies_raise_json_decode_error(data: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        codec.loads(data)
