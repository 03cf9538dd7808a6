"""The web page in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium): a
question and a follow-up that relies on it, the Markdown rendered, citations by name with their preview on
hover, the stage timeline, a click on a graph node opening the entity, and the API key asked for once.

Skipped, with the reason, when no browser is installed (`apt-get install chromium chromium-driver`;
`.ci/run` installs them). With SERVE_SCREENSHOT=path.png the conversation test saves a screenshot of the
answered page there (`make screenshot` writes docs/serve-page.png).
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
KEY = "page-test-key"


@pytest.fixture(scope="module")
def carol_router(carol_path: Path) -> Iterator[Router]:
    with Router.from_index(carol_path) as router:
        yield router


@pytest.fixture(scope="module")
def page_url(carol_router: Router) -> Iterator[str]:
    with ServiceThread(Service({"carol": carol_router})) as svc:
        yield svc.url + "/"


@pytest.fixture(scope="module")
def keyed_url(carol_router: Router) -> Iterator[str]:
    with ServiceThread(Service({"carol": carol_router}, api_keys=[KEY])) as svc:
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
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=DriverService(executable_path=str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(browser: Any, seconds: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, seconds)


def _ask(browser: Any, question: str, turn: int) -> Any:
    """Type the question, send it with Ctrl+Enter, wait until the turn is answered with its citations."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = browser.find_element(By.ID, "question")
    box.send_keys(question)
    box.send_keys(Keys.CONTROL, Keys.ENTER)
    selector = f"#conversation li.turn:nth-child({turn})"
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"{selector}.answered .citations li"))
    return browser.find_element(By.CSS_SELECTOR, selector)


def _page_errors(browser: Any) -> list[str]:
    """Script errors and Content-Security-Policy refusals the page logged."""
    return [e["message"] for e in browser.get_log("browser")
            if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]]


def test_conversation_citations_timeline_and_graph(browser: Any, page_url: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    browser.get(page_url)
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#index option"))
    assert browser.find_element(By.CSS_SELECTOR, "#index option").text == "carol (1 document, 529 entities)"
    assert not browser.find_element(By.ID, "key-dialog").is_displayed()  # no key needed, none asked for

    first = _ask(browser, "Who is Bob Cratchit?", 1)
    answer = first.find_element(By.CSS_SELECTOR, ".answer")
    assert "Cratchit" in answer.text
    assert "**" not in answer.text and "[Data:" not in answer.text  # Markdown rendered, references as buttons
    assert first.find_elements(By.CSS_SELECTOR, ".answer strong") and first.find_elements(By.CSS_SELECTOR, ".answer li")
    refs = first.find_elements(By.CSS_SELECTOR, ".answer sup.refs button.ref")
    assert refs and all(r.text.isdigit() for r in refs)
    assert "routed to local search" in first.find_element(By.CSS_SELECTOR, ".route").text

    # citations read as names, not ids; the record's text shows on hover
    chips = first.find_elements(By.CSS_SELECTOR, ".citations button.citation")
    labels = [c.find_element(By.CSS_SELECTOR, ".label").text for c in chips]
    assert "BOB CRATCHIT" in labels and "BOB CRATCHIT → EBENEZER SCROOGE" in labels, labels
    assert not any(label.startswith(("text unit", "Entities", "Relationships")) for label in labels)
    entity_chip = chips[labels.index("BOB CRATCHIT")]
    preview = entity_chip.find_element(By.XPATH, "following-sibling::span[@role='tooltip']")
    assert not preview.is_displayed()
    ActionChains(browser).move_to_element(entity_chip).perform()
    _wait(browser, 5).until(lambda d: preview.is_displayed())
    assert preview.text.startswith("BOB CRATCHIT: Bob Cratchit is the humble")

    # the stage timeline: one row per measured stage with tokens and seconds, then the total
    rows = first.find_elements(By.CSS_SELECTOR, ".timeline li")
    stages = [r.find_element(By.CSS_SELECTOR, ".stage").text for r in rows]
    assert stages[-1] == "total" and "answer" in stages and "build context" in stages, stages
    answer_row = rows[stages.index("answer")].find_element(By.CSS_SELECTOR, ".figures").text
    assert "1 call" in answer_row and "tokens" in answer_row and answer_row.endswith(" s"), answer_row

    # a follow-up: the earlier turn goes with it, so "his" is read as Bob Cratchit
    second = _ask(browser, "What happens to his son?", 2)
    assert "Bob Cratchit" in second.find_element(By.CSS_SELECTOR, ".rewrite").text
    assert "Tim" in second.find_element(By.CSS_SELECTOR, ".answer").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#conversation li.turn")) == 2

    # the graph shows the latest answer's cited entities and their neighbours; a click on a node opens it
    graph = browser.find_element(By.ID, "graph")
    nodes = browser.execute_script(
        "const cy = arguments[0].graphView;"
        "return cy.nodes().map(n => ({id: n.id(), title: n.data('title'), cited: n.data('cited'),"
        " x: n.renderedPosition('x'), y: n.renderedPosition('y')}));", graph)
    assert any(n["cited"] for n in nodes) and any(not n["cited"] for n in nodes)
    target = next(n for n in nodes if not n["cited"])  # a neighbour: not listed as a cited chip
    ActionChains(browser).move_to_element_with_offset(graph, int(target["x"] - graph.size["width"] / 2),
                                                      int(target["y"] - graph.size["height"] / 2)).click().perform()
    _wait(browser, 10).until(lambda d: d.find_element(By.ID, "entity").is_displayed())
    _wait(browser, 10).until(lambda d: d.find_element(By.ID, "entity-title").text == target["title"])
    assert browser.find_element(By.ID, "entity-description").text.strip()
    assert browser.find_elements(By.CSS_SELECTOR, "#entity-relationships li")
    assert browser.find_elements(By.CSS_SELECTOR, "#entity-sources li button")

    # from the entity, a source passage opens with its document
    browser.find_element(By.CSS_SELECTOR, "#entity-sources li button").click()
    _wait(browser, 10).until(lambda d: d.find_element(By.ID, "record-title").text.startswith("Passage"))
    assert browser.find_element(By.ID, "record-text").text.strip()
    browser.find_element(By.ID, "record-close").click()
    assert _page_errors(browser) == []
    if os.environ.get("SERVE_SCREENSHOT"):
        ActionChains(browser).move_to_element(browser.find_element(By.ID, "graph-title")).perform()
        browser.execute_script("document.querySelector('.explore').scrollTop = 0;"
                               "document.querySelector('#conversation li.turn:last-child').scrollIntoView();")
        browser.save_screenshot(os.environ["SERVE_SCREENSHOT"])


def test_markdown_from_the_model_cannot_run_script(browser: Any, page_url: str) -> None:
    browser.get(page_url)
    html = browser.execute_script(
        "const div = document.createElement('div');"
        "Markdown.render(div, '**bold** <img src=x onerror=\"window.hit=1\"> <script>window.hit=2</script>'"
        " + ' [link](javascript:window.hit=3) <a href=\"https://example.org\" style=\"color:red\">ok</a>');"
        "document.body.append(div); return div.innerHTML;")
    assert "<strong>bold</strong>" in html
    for bad in ("<img", "<script", "onerror", "javascript:", "style="):
        assert bad not in html, html
    assert browser.execute_script("return window.hit === undefined")


def test_the_key_is_asked_for_once_and_kept_for_the_tab(browser: Any, keyed_url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(keyed_url)
    browser.execute_script("sessionStorage.clear()")
    browser.get(keyed_url)
    dialog = _wait(browser, 10).until(lambda d: d.find_element(By.ID, "key-dialog") if
                                      d.find_element(By.ID, "key-dialog").is_displayed() else None)
    assert "Authorization" not in dialog.text and "Bearer" not in dialog.text
    field = browser.find_element(By.ID, "api-key")
    field.send_keys("wrong")
    browser.find_element(By.ID, "key-save").click()
    _wait(browser, 10).until(lambda d: "not accepted" in d.find_element(By.ID, "key-error").text)
    field.send_keys(KEY)
    browser.find_element(By.ID, "key-save").click()
    _wait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#index option"))
    assert browser.execute_script("return sessionStorage.getItem('graphroute-key')") == KEY

    browser.refresh()  # the same tab: the key is kept, not asked for again
    _wait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#index option"))
    assert not browser.find_element(By.ID, "key-dialog").is_displayed()
    assert browser.find_element(By.ID, "forget-key").is_displayed()
    browser.find_element(By.ID, "forget-key").click()
    _wait(browser, 10).until(lambda d: d.find_element(By.ID, "key-dialog").is_displayed())
    assert browser.execute_script("return sessionStorage.getItem('graphroute-key')") is None
    browser.find_element(By.ID, "api-key").send_keys(Keys.ESCAPE)  # no key given: said plainly, no header advice
    _wait(browser, 10).until(lambda d: "needs an API key" in d.find_element(By.ID, "status").text)
    assert "Bearer" not in browser.find_element(By.ID, "status").text


def test_narrow_screen_has_no_horizontal_scroll(browser: Any, page_url: str) -> None:
    browser.set_window_size(380, 800)
    try:
        browser.get(page_url)
        width = browser.execute_script("return document.documentElement.scrollWidth")
        inner = browser.execute_script("return window.innerWidth")
        assert width <= inner
    finally:
        browser.set_window_size(1400, 1000)


@pytest.fixture(scope="module")
def clobbering_url(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A copy of the Christmas Carol index whose BOB CRATCHIT description holds markup with the ids and names of
    the page's own elements (what a downloaded index, or a model that wrote its descriptions, can hold)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("clobbering") / "index"
    shutil.copytree(carol_path, folder)
    table = pq.read_table(folder / "entities.parquet")
    marked = [d + ' <pre id="record-text"></pre><p name="record-title" id="record">taken</p>'
              if t == "BOB CRATCHIT" else d
              for t, d in zip(table["title"].to_pylist(), table["description"].to_pylist(), strict=True)]
    column = table.schema.get_field_index("description")
    pq.write_table(table.set_column(column, "description", pa.array(marked, pa.string())), folder / "entities.parquet")
    with Router.from_index(folder) as router, ServiceThread(Service({"clob": router})) as svc:
        yield svc.url + "/"


def test_index_text_cannot_take_over_the_pages_elements(browser: Any, clobbering_url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get_log("browser")  # the earlier tests' entries
    browser.get(clobbering_url)
    _wait(browser, 30).until(lambda d: d.execute_script("return typeof openEntity === 'function'"))
    browser.execute_script("openEntity('clob', 'BOB CRATCHIT')")
    _wait(browser, 30).until(lambda d: d.find_element(By.ID, "entity-title").text == "BOB CRATCHIT")
    injected = browser.execute_script(
        "return [...document.querySelectorAll('#entity-description [id], #entity-description [name]')]"
        ".map(e => e.id || e.getAttribute('name'))")
    assert injected and all(name.startswith("user-content-") for name in injected), injected
    browser.find_element(By.CSS_SELECTOR, "#entity-sources li button").click()
    _wait(browser, 30).until(lambda d: d.find_element(By.ID, "record-title").text.startswith("Passage"))
    # the passage went into the dialog's own element, which the page found by its id
    assert browser.execute_script("return document.querySelectorAll('#record-text').length") == 1
    assert browser.execute_script("return document.getElementById('record-text').closest('dialog').id") == "record"
    assert browser.find_element(By.CSS_SELECTOR, "dialog#record #record-text").text.strip()
    assert not _page_errors(browser)
