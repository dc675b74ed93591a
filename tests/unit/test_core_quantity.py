"""Resource quantities: exact parsing, canonical printing and sums (PodGroup minResources)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from jobcontroller.core.quantity import ResourceSum, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "value", "binary"),
    [
        ("500m", Fraction(1, 2), False),
        ("2", Fraction(2), False),
        ("1.5", Fraction(3, 2), False),
        ("1Gi", Fraction(2**30), True),
        ("3k", Fraction(3000), False),
        ("1e3", Fraction(1000), False),
        ("100u", Fraction(1, 10_000), False),
        (4, Fraction(4), False),
    ],
)
def test_parse(text: str | int, value: Fraction, binary: bool) -> None:
    assert parse_quantity(text) == (value, binary)


@pytest.mark.parametrize("text", ["", "abc", "1Qi", "1.2.3"])
def test_parse_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        (Fraction(0), False, "0"),
        (Fraction(3, 2), False, "1500m"),
        (Fraction(2), False, "2"),
        (Fraction(4000), False, "4k"),
        (Fraction(3 * 2**30), True, "3Gi"),
        (Fraction(1536 * 2**20), True, "1536Mi"),
        (Fraction(1000), True, "1000"),
        (Fraction(1, 10**10), False, "1n"),
    ],
)
def test_format(value: Fraction, binary: bool, text: str) -> None:
    assert format_quantity(value, binary=binary) == text


def test_sum_keeps_first_format_and_skips_garbage() -> None:
    total = ResourceSum()
    total.add({"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1})
    total.add({"cpu": 1, "memory": "512Mi", "nvidia.com/gpu": "bogus"})
    assert total.as_dict() == {"cpu": "1500m", "memory": "1536Mi", "nvidia.com/gpu": "1"}
