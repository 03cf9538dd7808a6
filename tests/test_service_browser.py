"""The web page in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium):
ask, see the streamed answer and its route, open a citation's text unit and then its document.

Skipped, with the reason, when no browser is installed (`apt-get install chromium chromium-driver`;
`.ci/run` installs them). Set SERVE_SCREENSHOT=path.png to save a screenshot of the answered page.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from router import Router
from router.service import Service, ServiceThread

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="browser test skipped: no chromium/chromedriver (apt-get install chromium chromium-driver)",
)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


@pytest.fixture(scope="module")
def page_url(carol_path: Path) -> Iterator[str]:
    with Router.from_index(carol_path) as router, ServiceThread(Service({"carol": router})) as svc:
        yield svc.url + "/"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="graphroute-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument("--window-size=1000,1400")
    driver = webdriver.Chrome(service=DriverService(executable_path=str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_ask_stream_and_open_a_citation(browser: Any, page_url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    browser.get(page_url)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#index option"))
    question = browser.find_element(By.ID, "question")
    assert browser.find_element(By.CSS_SELECTOR, "label[for=question]").text == "Question"
    question.send_keys("Who is Bob Cratchit?")
    question.send_keys(Keys.CONTROL, Keys.ENTER)  # keyboard only
    answer = browser.find_element(By.ID, "answer")
    assert answer.get_attribute("aria-live") == "polite"
    wait.until(lambda d: d.find_element(By.ID, "details").is_displayed())
    assert "Cratchit" in answer.text
    assert "routed to local" in browser.find_element(By.ID, "route").text
    assert browser.find_elements(By.CSS_SELECTOR, "#reasons li")
    assert browser.find_element(By.CSS_SELECTOR, "#usage tr.total th").text == "total"
    if os.environ.get("SERVE_SCREENSHOT"):
        browser.save_screenshot(os.environ["SERVE_SCREENSHOT"])

    browser.find_element(By.CSS_SELECTOR, "#citations button[data-unit]").click()
    dialog = wait.until(ec.visibility_of_element_located((By.ID, "record")))
    wait.until(lambda d: d.find_element(By.ID, "record-text").text.strip())
    assert browser.find_element(By.ID, "record-title").text.startswith("Text unit")
    dialog.find_element(By.CSS_SELECTOR, "#record-doc button").click()
    wait.until(lambda d: d.find_element(By.ID, "record-title").text.startswith("Document:"))
    assert len(browser.find_element(By.ID, "record-text").text) > 100
    browser.find_element(By.ID, "record-close").click()
    wait.until(lambda d: not d.find_element(By.ID, "record").is_displayed())


def test_narrow_screen_has_no_horizontal_scroll(browser: Any, page_url: str) -> None:
    browser.set_window_size(380, 800)
    try:
        browser.get(page_url)
        width = browser.execute_script("return document.documentElement.scrollWidth")
        inner = browser.execute_script("return window.innerWidth")
        assert width <= inner
    finally:
        browser.set_window_size(1000, 1400)
