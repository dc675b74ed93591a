"""Resource quantities (``500m``, ``2``, ``1Gi``, ``1e3``): exact sums for PodGroup minResources.

Sums are exact (fractions) and printed in one canonical form, so a PodGroup computed twice from
the same job compares equal to the stored one and is not patched again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction

from msgspec import Struct, field

__all__ = ["ResourceSum", "format_quantity", "parse_quantity"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|[a-zA-Z]*)$")


def parse_quantity(value: int | float | str) -> tuple[Fraction, bool]:
    """The exact value and whether it was written with a binary (``Ki``...) suffix.

    Raises ValueError for text that is not a quantity.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Fraction(value), False
    match = _PATTERN.match(value.strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix], True
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix], False
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:]), False
    raise ValueError(f"not a quantity: {value!r}")


def format_quantity(value: Fraction, *, binary: bool) -> str:
    """The shortest exact form: the largest suffix that divides the value; values finer than
    a nano-unit are rounded up, as Kubernetes does."""
    if value == 0:
        return "0"
    if binary and value.denominator == 1:
        for suffix, multiple in reversed(_BINARY.items()):
            if value % multiple == 0:
                return f"{value // multiple}{suffix}"
        return str(value.numerator)
    for suffix, exponent in sorted(_DECIMAL.items(), key=lambda item: -item[1]):
        scaled = value / Fraction(10) ** exponent
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(value * 10**9)}n"


class ResourceSum(Struct):
    """A running sum of resource lists; each resource keeps the format of its first term."""

    totals: dict[str, Fraction] = field(default_factory=dict)
    binary: dict[str, bool] = field(default_factory=dict)

    def add(self, resources: Mapping[str, object], *, times: int = 1) -> None:
        """Add a ``ResourceList`` ``times`` over; entries that are not quantities are skipped
        (the apiserver rejects such pods anyway)."""
        for name, raw in resources.items():
            if not isinstance(raw, int | float | str):
                continue
            try:
                amount, is_binary = parse_quantity(raw)
            except (ValueError, ZeroDivisionError):
                continue
            self.totals[name] = self.totals.get(name, Fraction(0)) + amount * times
            self.binary.setdefault(name, is_binary)

    def as_dict(self) -> dict[str, str]:
        return {
            name: format_quantity(total, binary=self.binary.get(name, False))
            for name, total in sorted(self.totals.items())
        }
