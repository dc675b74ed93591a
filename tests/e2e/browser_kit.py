"""What the browser test of ``kfjob ui`` (test_kfjob_ui_browser.py) drives the page with:
Chromium headless, ``kfjob ui`` as a user runs it, waits on conditions in the page (never a
sleep), clicks that survive the live updates replacing what they click, and screenshots.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.lognode import LogNode

KFJOB = str(Path(sys.executable).parent / "kfjob")
SHOTS = os.environ.get("KFJOB_UI_SCREENSHOTS")
T = TypeVar("T")


@contextlib.contextmanager
def browser(chromedriver: str, *, dark: bool = False) -> Iterator[WebDriver]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",  # as root
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--disable-gpu",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(chromedriver))
    if dark:
        driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
    try:
        yield driver
    finally:
        driver.quit()


@contextlib.contextmanager
def kfjob_ui(kubeconfig: Path | str) -> Iterator[str]:
    """``kfjob ui --port 0`` as a user runs it; yields the URL it prints."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    proc = subprocess.Popen(
        [KFJOB, "ui", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert match, f"no URL in {line!r}: {proc.stderr.read() if proc.stderr else ''}"
        yield match[0]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def answers_200(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


async def until(check: Callable[[], bool], *, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def wait(
    driver: WebDriver, check: Callable[[WebDriver], T], *, timeout: float = 20, what: str
) -> T:
    try:
        return WebDriverWait(
            driver,
            timeout,
            poll_frequency=0.05,
            ignored_exceptions=[StaleElementReferenceException],
        ).until(check)
    except WebDriverException as exc:
        raise AssertionError(f"{what}: not within {timeout}s\n{_page_text(driver)}") from exc


def _page_text(driver: WebDriver) -> str:
    try:
        return str(driver.find_element(By.TAG_NAME, "main").text)[-3000:]
    except WebDriverException:
        return "(no page)"


def texts(driver: WebDriver, css: str) -> list[str]:
    """The text of each element ``css`` matches, read in one go in the page (an element the
    live updates replace between a lookup and a read would be stale)."""
    script = "return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText)"
    return [str(t) for t in driver.execute_script(script, css)]


def text_of(driver: WebDriver, css: str) -> str:
    found = texts(driver, css)
    return found[0] if found else ""


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    run = subprocess.run(
        [find_binaries()["kubectl"], f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def pytorchjob(name: str, namespace: str, log_node: LogNode | None) -> dict[str, Any]:
    def template() -> dict[str, Any]:
        t: dict[str, Any] = {
            "metadata": {"annotations": {}},
            "spec": {"containers": [{"name": "pytorch", "image": "pytorch/pytorch:2.3"}]},
        }
        if log_node is not None:
            log_node.place(t)
        return t  # no simulation annotations: the pods run until deleted

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template()},
                "Worker": {"replicas": 1, "restartPolicy": "OnFailure", "template": template()},
            }
        },
    }


def screenshot(driver: WebDriver, name: str) -> None:
    if not SHOTS:
        return
    out = Path(SHOTS)
    out.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height), 700), 2200))
    driver.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.3)
    driver.save_screenshot(str(out / f"{name}.png"))
    driver.set_window_size(1280, 900)


def click(driver: WebDriver, css: str) -> None:
    """Click what ``css`` finds, again if a live update replaced it meanwhile."""

    def press(d: WebDriver) -> bool:
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    wait(driver, press, what=f"clicking {css}")


def action_buttons(driver: WebDriver, *, enabled: bool) -> list[Any]:
    state = ":not([disabled])" if enabled else "[disabled]"
    return list(driver.find_elements(By.CSS_SELECTOR, f"form[data-action] button{state}"))


def confirm(driver: WebDriver, action: str, *, stale_page: bool = False) -> None:
    """Press an action's button, then Confirm in the dialog it opens. ``stale_page``: as a
    page loaded before the user lost the right would, with the button enabled (enabled and
    pressed in one script, so no live update can disable it in between)."""
    css = f'form[data-action="{action}"] button'
    if stale_page:
        driver.execute_script(
            "const b = document.querySelector(arguments[0]); b.disabled = false; b.click()", css
        )
    else:
        click(driver, css)
    wait(driver, lambda d: d.find_element(By.ID, "confirm").is_displayed(), what="dialog")
    assert driver.switch_to.active_element.get_attribute("id") == "confirm-cancel"
    driver.find_element(By.ID, "confirm-ok").click()


def can_i(kubeconfig: str, verb: str, resource: str, namespace: str) -> str:
    run = subprocess.run(
        [
            find_binaries()["kubectl"],
            f"--kubeconfig={kubeconfig}",
            "auth",
            "can-i",
            verb,
            resource,
            "-n",
            namespace,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return run.stdout
