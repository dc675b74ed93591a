"""What a JobController is built with is what it uses."""

from __future__ import annotations

from jobcontroller.runtime.expectations import Expectations
from tf_operator.controller import TFJobController


def test_an_empty_expectations_cache_passed_in_is_the_one_used() -> None:
    # An empty cache is falsy (it has __len__); it was silently swapped for a default one, so
    # a short timeout given for tests or by an operator never applied.
    given = Expectations(timeout=2)
    controller = TFJobController(expectations=given)
    assert controller.expectations is given
    assert controller.expectations.timeout == 2
