# Two entry points: `make demo` and `make test`. Both create .venv and install the project if needed.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
DEMO_INDEX := .graphroute-cache/demo_index

.PHONY: demo test test-long test-data lint install clean-demo bench screenshot

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(PY) -c "import router, engines, shared_context, indexer"
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m router.demo --index $(DEMO_INDEX)

test: $(STAMP)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		echo "NOTE: no chromium/chromedriver: the browser test (tests/test_service_browser.py) is SKIPPED (apt-get install chromium chromium-driver)"
	@command -v redis-server >/dev/null && command -v haproxy >/dev/null || \
		echo "NOTE: no redis-server/haproxy: the replica tests (tests/test_replicas.py, test_shared_state.py) are SKIPPED (apt-get install redis-server haproxy)"
	$(PY) -m pytest

# the whole stage x fault and corrupted-index matrices and many more property examples (not part of `make test`)
test-long: $(STAMP)
	GRAPHROUTE_HYPOTHESIS_PROFILE=long $(PY) -m pytest tests/test_robust_properties.py

# the tests that need the benchmark data sets (not part of `make test`): GRAPHROUTE_BENCH_DATA names their folder
# (default ../shared/data); docs/contributing.md lists what they need and where it comes from
test-data: $(STAMP)
	$(PY) -m pytest -m bench_data

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# docs/serve-page.png: the web page after a question and a follow-up on the Christmas Carol index, taken by the
# browser test in headless Chromium
screenshot: $(STAMP)
	SERVE_SCREENSHOT=$(CURDIR)/docs/serve-page.png $(PY) -m pytest -q \
		tests/test_service_browser.py::test_conversation_citations_timeline_and_graph

clean-demo:
	rm -rf $(DEMO_INDEX)
