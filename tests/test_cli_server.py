"""`graphroute ask --server URL` gives the answer `graphroute ask --index PATH` gives, from a running
`graphroute serve`, and names the problem when the server is not there."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engines import load_config
from router.cli import main
from router.router import Router
from shared_context import load_index

REPO = Path(__file__).resolve().parents[1]
QUESTION = "Who is Bob Cratchit?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answer(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["ask", QUESTION, "--json", *args]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_ask_through_a_server_gives_the_local_answer(carol_path: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "GRAPHROUTE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--index",
                             f"carol={carol_path}"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.5)
        served = _answer(capsys, "--server", url, "--index", "carol")
        with Router(load_index(carol_path), config=load_config(None)) as router:  # the server's configuration
            local = router.ask(QUESTION).to_dict()
        assert served["text"] == local["text"] and served["engine"] == local["engine"] == "local"
        assert served["citations"] == local["citations"]
        assert main(["ask", QUESTION, "--server", url]) == 0  # the rendered answer, as the local command prints it
        printed = capsys.readouterr().out
        assert "answer — local search" in printed and "citations" in printed and "usage" in printed
        assert main(["ask", QUESTION, "--server", url, "--index", "nosuch"]) == 2
        assert "refused the question (HTTP 404)" in capsys.readouterr().err.replace("\n", " ")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_no_server_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    assert main(["ask", QUESTION, "--server", url]) == 2
    assert f"cannot reach the server at {url}" in capsys.readouterr().err.replace("\n", " ")
