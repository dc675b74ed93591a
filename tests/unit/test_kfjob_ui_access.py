"""``kfjob ui`` offers suspend, resume and delete as the API server says the user may: the
answers are cached per namespace, resource and verb for a while, and a refused action's button
is disabled, saying why. (The API server's own answers: tests/integration/test_kfjob_ui_live.py
and the browser test.)"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kfjob.client import ApiFailure
from kfjob.ui.access import Access
from kfjob.ui.model import TRAINJOB, V1_KINDS, Permission
from kfjob.ui.pages import job_sections

PYTORCH = next(k for k in V1_KINDS if k.kind == "PyTorchJob")
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Reviews:
    """Stands in for the API server's SelfSubjectAccessReview: allows what ``rules`` hold."""

    def __init__(self, rules: set[tuple[str, str, str]]) -> None:
        self.rules = rules
        self.calls: list[tuple[str, str, str]] = []
        self.failure: ApiFailure | None = None

    def may(self, *, namespace: str, group: str, resource: str, verb: str) -> tuple[bool, str]:
        self.calls.append((namespace, f"{resource}.{group}", verb))
        if self.failure:
            raise self.failure
        return (namespace, resource, verb) in self.rules, ""


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def access(reviews: Reviews, clock: Clock) -> Access:
    return Access(reviews, ttl=10, clock=clock)  # type: ignore[arg-type]  # only may() is used


def test_answers_are_cached_per_namespace_resource_and_verb_for_a_while() -> None:
    reviews, clock = Reviews({("a", "pytorchjobs", "patch")}), Clock()
    cache = access(reviews, clock)
    first = cache.actions(PYTORCH, "a")
    assert first["suspend"] == first["resume"] == Permission(True)
    assert first["delete"].allowed is False
    assert "delete pytorchjobs.kubeflow.org in namespace a" in first["delete"].why
    assert len(reviews.calls) == 2  # patch and delete: suspend and resume share the answer

    cache.actions(PYTORCH, "a")
    clock.now += 9
    cache.actions(PYTORCH, "a")
    assert len(reviews.calls) == 2  # from the cache
    cache.actions(PYTORCH, "b")
    cache.actions(TRAINJOB, "a")
    assert len(reviews.calls) == 6  # another namespace, another resource: asked

    reviews.rules.add(("a", "pytorchjobs", "delete"))  # a role granted meanwhile
    clock.now += 2
    assert cache.actions(PYTORCH, "a")["delete"] == Permission(True)
    clock.now += 30
    cache.permission(PYTORCH, "b", "delete")
    assert len(cache._cache) == 1  # what expired is forgotten, not kept


def test_an_unanswered_review_offers_the_action_and_says_so() -> None:
    reviews, clock = Reviews(set()), Clock()
    reviews.failure = ApiFailure(500, "etcd is down")
    permission = access(reviews, clock).permission(PYTORCH, "a", "delete")
    assert permission.allowed is None and "etcd is down" in permission.why


def summary(permissions: dict[str, Permission], **spec: Any) -> str:
    job = {
        "metadata": {"name": "mnist", "namespace": "a"},
        "spec": spec,
        "status": {"conditions": [{"type": "Running", "status": "True"}]},
    }
    return job_sections(
        PYTORCH, job, pods=[], events=[], env="", csrf="t", now=NOW, permissions=permissions
    )["summary"]


def test_a_refused_action_is_disabled_with_its_reason() -> None:
    no = Permission(False, "your RBAC does not let you delete pytorchjobs.kubeflow.org in a.")
    html = summary({"suspend": Permission(True), "delete": no})
    suspend = html[html.index('data-action="suspend"') :].split("</form>")[0]
    delete = html[html.index('data-action="delete"') :].split("</form>")[0]
    assert "disabled" not in suspend
    assert f'disabled title="{no.why}" aria-describedby="why-delete"' in delete
    assert f'<p class="note" id="why-delete">Delete: {no.why}</p>' in html


def test_an_unknown_permission_leaves_the_action_to_the_api_server() -> None:
    html = summary({"suspend": Permission(None, "could not ask"), "delete": Permission(True)})
    assert "disabled" not in html and 'title="could not ask"' in html
