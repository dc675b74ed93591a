"""``kfjob ui`` in a real browser (Chromium from Debian's packages, driven by Selenium) against
the local cluster, with the PyTorchJob operator running as its Deployment runs it (a process)
and ``kfjob ui`` started as a user starts it (``.venv/bin/kfjob ui``, their kubeconfig).

- A job created with ``kubectl`` appears on the open jobs page within 2 s, without a reload
  (the issue's bar), and its state follows the operator's conditions.
- Its page shows its pods and events; a pod's log streams as lines are written, and the
  previous container's log is there too. kwok's usual nodes serve no logs, so the job's pods
  run on :class:`~jobcontroller.testing.lognode.LogNode`, a kwok node whose kubelet API serves
  a log file: the stream goes browser -> kfjob ui -> kube-apiserver -> the node, as on a real
  cluster; only the log's writer is the test.
- Suspend works through its button and confirmation: the pods go, the state says Suspended.
- A user bound only to ``view`` in one namespace sees that namespace's jobs and not another
  namespace's; the API server says they may not patch or delete them, so their page has no
  enabled action button (each says why), and a stale page's suspend and delete show the API
  server's 403. The admin's buttons are enabled.
- A TrainJob created with ``kubectl`` is listed (its CRD is enough: no JobSet controller), and
  its row follows its status: Complete, its JobSet's job counts, the trainer's progress.
- The Render page shows a refused job's errors at their lines, and a good job's pods.

``KFJOB_UI_SCREENSHOTS=docs/images`` saves the main views, light and dark, there.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from browser_kit import (
    SHOTS,
    action_buttons,
    answers_200,
    browser,
    can_i,
    click,
    confirm,
    kfjob_ui,
    kubectl,
    pytorchjob,
    screenshot,
    text_of,
    texts,
    until,
    wait,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from jobcontroller.runtime.kube import PODS, KubeApi, Resource
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.lognode import LogNode
from jobcontroller.testing.ports import free_port
from jobcontroller.testing.waiting import wait_for_list

ROOT = Path(__file__).resolve().parents[2]
PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")

pytestmark = pytest.mark.cluster


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def chromedriver() -> str:
    """Chromium and chromedriver, installed from Debian's packages when missing. The one skip:
    a machine where the test kit cannot install them (not root, or no apt-get; the script
    says which), as the real-node tests need root; a failed install fails the test."""
    run = subprocess.run(
        ["bash", str(ROOT / "hack" / "ensure-browser.sh")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if run.returncode == 2:  # not root, or no apt-get: said why
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def log_node(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LogNode]:
    node = LogNode(control_plane, directory=tmp_path_factory.mktemp("lognode"))
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, kubeflow_crds: list[str], tmp_path: Path
) -> AsyncIterator[None]:
    """The PyTorchJob operator as its Deployment runs it, in a process of its own."""
    health = free_port()
    log = tmp_path / "pytorch-operator.log"
    argv = [
        sys.executable, "-m", "pytorch_operator", "run", f"--kubeconfig={kubeconfig}",
        f"--metrics-port={free_port()}", f"--health-port={health}", "--log-format=json",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        await until(lambda: answers_200(f"http://127.0.0.1:{health}/readyz"), what="operator ready")
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 30)


# ----------------------------------------------------------------------------- tests


async def test_a_job_lives_on_the_page(
    kube: KubeApi,
    kubeconfig: str,
    namespace: str,
    operator: None,
    log_node: LogNode,
    chromedriver: str,
) -> None:
    name = "mnist-ddp"
    key = f"pytorchjobs/{namespace}/{name}"
    row = f'tr[data-key="{key}"]'
    log_node.write("epoch 1 loss=0.91", previous=True)
    log_node.write("epoch 2 loss=0.52")
    with kfjob_ui(kubeconfig) as url, browser(chromedriver) as driver:
        driver.get(url)
        wait(driver, lambda d: "Live" in text_of(d, "#live"), what="the jobs page live")
        driver.execute_script("window.kfjobMarker = 'same page'")

        kubectl(
            kubeconfig,
            "create",
            "-f",
            "-",
            stdin=yaml.safe_dump(pytorchjob(name, namespace, log_node)),
        )
        wait(
            driver,
            lambda d: d.find_elements(By.CSS_SELECTOR, row),
            timeout=2,
            what="the new job's row",
        )
        assert driver.execute_script("return window.kfjobMarker") == "same page"  # no reload

        def cells(d: WebDriver) -> list[str]:
            return texts(d, f"{row} td, {row} th")

        # The row follows the job: Running, both pods active (the operator counts them).
        wait(driver, lambda d: cells(d)[3:4] == ["Running"] and cells(d)[5] == "2", what="Running")
        assert cells(driver)[:3] == ["PyTorchJob", namespace, name]
        screenshot(driver, "kfjob-ui-jobs-light")

        click(driver, f"{row} a")
        wait(driver, lambda d: "Live" in text_of(d, "#live"), what="the job's page live")
        pods = [f"{name}-master-0", f"{name}-worker-0"]
        wait(
            driver,
            lambda d: all(text_of(d, f'#pods-table tr[data-pod="{p}"]') for p in pods),
            what="both pods listed",
        )
        # The admin may patch and delete the job: both buttons are enabled.
        assert len(action_buttons(driver, enabled=True)) == 2
        assert not action_buttons(driver, enabled=False)
        master = text_of(driver, f'#pods-table tr[data-pod="{pods[0]}"]')
        assert "Running" in master and log_node.name in master, master
        wait(driver, lambda d: "SuccessfulCreatePod" in text_of(d, "#sec-events"), what="events")
        assert "Created" in text_of(driver, "#sec-conditions")

        # The master's log, followed: a line written now appears without asking again.
        click(driver, f'button.show-logs[data-pod="{pods[0]}"]')
        wait(driver, lambda d: "epoch 2 loss=0.52" in text_of(d, "#log-output"), what="the log")
        log_node.write("epoch 3 loss=0.31")
        wait(driver, lambda d: "epoch 3 loss=0.31" in text_of(d, "#log-output"), what="a new line")
        assert "following" in text_of(driver, "#log-status")
        driver.find_element(By.ID, "sec-env").find_element(By.XPATH, "..")  # the section exists
        driver.find_element(By.CSS_SELECTOR, "#d-env summary").click()
        wait(driver, lambda d: f"MASTER_ADDR={pods[0]}" in text_of(d, "#sec-env"), what="env")
        screenshot(driver, "kfjob-ui-job-light")

        driver.find_element(By.ID, "log-previous").click()
        driver.find_element(By.ID, "log-start").click()
        wait(
            driver,
            lambda d: "epoch 1 loss=0.91" in text_of(d, "#log-output"),
            what="the previous container's log",
        )
        assert "epoch 3" not in text_of(driver, "#log-output")

        confirm(driver, "suspend")
        wait(driver, lambda d: "suspended" in text_of(d, "#action-result"), what="suspend done")
        wait(driver, lambda d: "Suspended" in text_of(d, "#sec-summary .state"), what="Suspended")
        wait(
            driver,
            lambda d: not d.find_elements(By.CSS_SELECTOR, "#pods-table tr[data-pod]"),
            what="pods gone",
        )
        assert driver.find_elements(By.CSS_SELECTOR, 'form[data-action="resume"]')
    job = await kube.get(PYTORCHJOBS, name, namespace=namespace)
    assert job["spec"]["runPolicy"]["suspend"] is True
    await wait_for_list(
        kube,
        PODS,
        namespace=namespace,
        label_selector=f"training.kubeflow.org/job-name={name}",
        until=lambda p: not p,
    )


async def test_a_viewer_sees_their_namespace_only_and_cannot_act(
    kube: KubeApi,
    kubeconfig: str,
    control_plane: ControlPlane,
    namespace: str,
    chromedriver: str,
    kubeflow_crds: list[str],
) -> None:
    # The roles users are given (kubeflow-training-view is aggregated into view).
    kubectl(kubeconfig, "apply", "-f", str(ROOT / "manifests" / "base" / "user-roles.yaml"))
    other = f"{namespace}-other"
    kubectl(kubeconfig, "create", "namespace", other)
    try:
        user = f"viewer-{namespace}"
        kubectl(
            kubeconfig, "create", "rolebinding", "viewer", "--clusterrole=view",
            f"--user={user}", "-n", namespace,
        )  # fmt: skip
        viewer = Path(control_plane.user_kubeconfig(user=user))
        config = yaml.safe_load(viewer.read_text())
        config["contexts"][0]["context"]["namespace"] = namespace
        viewer.write_text(yaml.safe_dump(config))
        for ns in (namespace, other):
            kubectl(
                kubeconfig,
                "create",
                "-f",
                "-",
                stdin=yaml.safe_dump(pytorchjob("shared", ns, None)),
            )
        # The aggregated rules reach `view` through the controller-manager: wait for them.
        await until(
            lambda: "yes" in can_i(str(viewer), "list", "pytorchjobs.kubeflow.org", namespace),
            what="view aggregating kubeflow-training-view",
        )

        with kfjob_ui(viewer) as url, browser(chromedriver, dark=True) as driver:
            driver.get(url)
            mine = f'tr[data-key="pytorchjobs/{namespace}/shared"]'
            wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, mine), what="their job")
            assert not driver.find_elements(
                By.CSS_SELECTOR, f'tr[data-key="pytorchjobs/{other}/shared"]'
            )
            options = [
                o.get_attribute("value")
                for o in driver.find_elements(By.CSS_SELECTOR, "#filter-namespace option")
            ]
            assert namespace in options and other not in options, options
            screenshot(driver, "kfjob-ui-jobs-dark")

            click(driver, f"{mine} a")
            wait(driver, lambda d: "Live" in text_of(d, "#live"), what="the job's page")
            # The API server said no (SelfSubjectAccessReview): no button is enabled, and
            # each says why.
            assert len(action_buttons(driver, enabled=False)) == 2
            assert not action_buttons(driver, enabled=True)
            titles = driver.execute_script(
                "return [...document.querySelectorAll('form[data-action] button')]"
                ".map((b) => b.title)"
            )
            assert all("your RBAC does not let you" in t for t in titles), titles
            why = text_of(driver, "#sec-summary")
            resource = "pytorchjobs.kubeflow.org"
            assert f"Delete: your RBAC does not let you delete {resource} in namespace" in why
            screenshot(driver, "kfjob-ui-job-dark")
            # A page older than the user's loss of a role still offers the buttons: the API
            # server's 403 is what they see then.
            for action in ("suspend", "delete"):
                confirm(driver, action, stale_page=True)
                said = f"{action.capitalize()} refused by the API server"
                wait(
                    driver,
                    lambda d, said=said: said in text_of(d, "#action-result"),
                    what=f"{action} refused",
                )
                result = text_of(driver, "#action-result")
                assert "403 Forbidden" in result and f'User "{user}" cannot' in result, result
                assert "alert-error" in str(
                    driver.find_element(By.ID, "action-result").get_attribute("class")
                )
        job = await kube.get(PYTORCHJOBS, "shared", namespace=namespace)
        assert not (job["spec"].get("runPolicy") or {}).get("suspend")
    finally:
        kubectl(kubeconfig, "delete", "namespace", other, "--wait=false")


async def test_a_trainjob_created_with_kubectl_is_listed(
    kube: KubeApi, kubeconfig: str, namespace: str, chromedriver: str, kubeflow_crds: list[str]
) -> None:
    """TrainJob is listed from its CRD alone (no JobSet controller needed), and its row follows
    its status: its conditions, its JobSet's job counts, the trainer's progress."""
    row = f'tr[data-key="trainjobs/{namespace}/llm"]'
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": namespace},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    with kfjob_ui(kubeconfig) as url, browser(chromedriver) as driver:
        driver.get(url)
        wait(driver, lambda d: "Live" in text_of(d, "#live"), what="the jobs page live")
        assert "TrainJob" in text_of(driver, ".lead")  # among the kinds served
        kubectl(kubeconfig, "create", "-f", "-", stdin=yaml.safe_dump(trainjob))
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, row), what="the TrainJob's row")
        assert texts(driver, f"{row} td, {row} th")[:4] == ["TrainJob", namespace, "llm", "Pending"]

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        counts = {"active": 0, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 0}
        status = {
            "conditions": [
                {"type": "Complete", "status": "True", "reason": "JobsCompleted",
                 "message": "done", "lastTransitionTime": now},
            ],
            "jobsStatus": [
                {"name": "node", **counts, "succeeded": 2},
                {"name": "initializer", **counts, "succeeded": 1, "failed": 1},
            ],
            "trainerStatus": {
                "progressPercentage": 100, "estimatedRemainingSeconds": 0,
                "lastUpdatedTime": now,
            },
        }  # fmt: skip
        kubectl(
            kubeconfig, "patch", "trainjob", "llm", "-n", namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}),
        )  # fmt: skip

        def shown(d: WebDriver) -> bool:
            cells = texts(d, f"{row} td, {row} th")  # kind ... state, age, active ... progress
            return cells[3] == "Complete" and cells[5:] == ["0", "3", "1", "0", "100%, 0s left"]

        wait(driver, shown, what="the TrainJob's status in its row")
        click(driver, f"{row} a")
        wait(driver, lambda d: "Live" in text_of(d, "#live"), what="the TrainJob's page")
        assert "100%, 0s left" in text_of(driver, "#sec-summary")
        assert "initializer" in text_of(driver, "#sec-replicas")


async def test_the_render_page_shows_errors_at_their_lines_and_a_good_jobs_pods(
    kubeconfig: str, chromedriver: str, kubeflow_crds: list[str]
) -> None:
    bad = (ROOT / "tests" / "data" / "seeds" / "distributed-pytorch-job.yaml").read_text()
    doc = yaml.safe_load(bad)
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -1
    text = yaml.safe_dump(doc, sort_keys=False)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "replicas: -1" in ln)
    with kfjob_ui(kubeconfig) as url, browser(chromedriver) as driver:
        driver.get(url + "render")
        area = driver.find_element(By.ID, "yaml")
        driver.execute_script("arguments[0].value = arguments[1]", area, text)
        driver.find_element(By.CSS_SELECTOR, ".render-form button[type=submit]").click()
        wait(driver, lambda d: d.find_elements(By.ID, "render-errors"), what="the errors")
        assert driver.switch_to.active_element.get_attribute("id") == "render-errors"
        at = text_of(driver, f"#L{line}")
        assert "replicas" in at and "greater than or equal to 0" in at, at
        screenshot(driver, "kfjob-ui-render-error-light")

        area = driver.find_element(By.ID, "yaml")
        driver.execute_script("arguments[0].value = arguments[1]", area, bad)
        driver.find_element(By.CSS_SELECTOR, ".render-form button[type=submit]").click()
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".rendered"), what="the result")
        result = text_of(driver, ".rendered")
        for pod in ("distributed-pytorch-job-master-0", "distributed-pytorch-job-worker-0"):
            assert pod in result
        screenshot(driver, "kfjob-ui-render-light")
    if SHOTS:
        with browser(chromedriver, dark=True) as driver, kfjob_ui(kubeconfig) as url:
            driver.get(url + "render")
            area = driver.find_element(By.ID, "yaml")
            driver.execute_script("arguments[0].value = arguments[1]", area, bad)
            driver.find_element(By.CSS_SELECTOR, ".render-form button[type=submit]").click()
            wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".rendered"), what="the result")
            screenshot(driver, "kfjob-ui-render-dark")
