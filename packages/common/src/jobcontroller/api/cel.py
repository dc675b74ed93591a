"""CEL rule helpers that know nothing of the job models.

Here rather than in :mod:`jobcontroller.api.crd` so that :mod:`jobcontroller.api.rules`, which
:mod:`jobcontroller.api.common` imports, can ratchet its rules without importing ``common``
back; ``crd`` re-exports both.
"""

from __future__ import annotations

import re

from pydantic import JsonValue

__all__ = ["JsonDict", "cel_create_only", "cel_ratcheted"]

JsonDict = dict[str, JsonValue]
"""A JSON object as pydantic's `json_schema_extra` accepts it (CEL rules are built as these)."""

_SELF = re.compile(r"\bself\b")


def cel_ratcheted(rule: JsonDict) -> list[JsonDict]:
    """The rule for new jobs, and on updates only for jobs that met it before.

    Two rules: :func:`cel_create_only` judges creations; a transition rule,
    ``!rule(oldSelf) || rule(self)``, judges updates, so a stored job that already broke the
    rule (created under the Go operators' CRDs, which had none) stays writable, its status
    included, while a job that met it cannot be edited (or scaled) into breaking it.
    """
    text = str(rule["rule"])
    old = _SELF.sub("oldSelf", text)
    return [cel_create_only(rule), {**rule, "rule": f"!({old}) || ({text})"}]


def cel_create_only(rule: JsonDict) -> JsonDict:
    """The rule judged when an object is created, not on later writes (``optionalOldSelf``).

    Half of :func:`cel_ratcheted`. The API server's own ratcheting does not keep a stored job
    that breaks a rule writable: a root-level rule is judged on every status write (the root
    changed), and a replica spec whose template has metadata is never found equal to its old
    value. One rule doing both halves (``(oldSelf.hasValue() && !rule(oldSelf.value())) ||
    rule(self)``) is priced by the cost estimator as unbounded, past the budget; two rules
    are not.
    """
    text = str(rule["rule"])
    return {**rule, "rule": f"oldSelf.hasValue() || ({text})", "optionalOldSelf": True}
