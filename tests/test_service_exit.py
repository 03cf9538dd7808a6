"""Clean exits, run as a user runs them, in a subprocess against the loopback model server: a script that asks
and exits without closing anything, `graphroute ask`, `route-bench` and `graphroute serve` stopped with Ctrl-C
print no "Unclosed client session" / "Unclosed connector" / ResourceWarning on stderr, with the aiohttp and
the httpx transports. And `graphroute serve` binds its port before it prints the address: a busy port is one
line and exit code 2, with or without workers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from testing.model_server import LoopbackServer

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REPLY = "Bob Cratchit is Scrooge's clerk [Data: Sources (1)]."


@pytest.fixture(scope="module")
def model() -> Iterator[LoopbackServer]:
    with LoopbackServer(default_reply=REPLY, embedding_dim=3072) as srv:  # the size of the index's vectors
        yield srv


def _env(model: LoopbackServer, transport: str = "auto") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GRAPHROUTE_API", "GRAPHROUTE_BASE"))}
    env.update(GRAPHROUTE_BASE_URL=model.base_url, GRAPHROUTE_API_KEY="k", GRAPHROUTE_CHAT_MODEL="gpt-4.1",
               GRAPHROUTE_EMBEDDING_MODEL="text-embedding-3-large", PYTHONWARNINGS="default::ResourceWarning")
    env["GRAPHROUTE_TEST_TRANSPORT"] = transport
    return env


SCRIPT = textwrap.dedent('''
    import asyncio, gc, os, sys
    from engines import load_config
    from engines.models.config import models_config_from_mapping
    from router import Router

    transport = os.environ["GRAPHROUTE_TEST_TRANSPORT"]
    models = models_config_from_mapping({"chat": {"http_client": transport}, "embedding": {"http_client": transport}})
    config = load_config(None).model_copy(update={"models": models})
    index = sys.argv[1]
    # a Router made, asked and dropped (collected at once), never closed
    print(Router.from_index(index, config=config).ask("Who is Bob Cratchit?").text[:12])
    gc.collect()
    # one kept until the interpreter exits, asked from the sync API and from the caller's own loop
    kept = Router.from_index(index, config=config)
    print(kept.ask("Who is Scrooge?").text[:12])
    print(asyncio.run(kept.aask("Who is Fred?")).text[:12])
''')


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_script_that_asks_and_exits_prints_nothing_on_stderr(model: LoopbackServer, carol_path: Path,
                                                                 transport: str) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(carol_path)], env=_env(model, transport), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Bob Cratchit") == 3  # three answers, through the model endpoint
    assert done.stderr == ""


def test_cli_ask_exits_cleanly(model: LoopbackServer, carol_path: Path) -> None:
    done = subprocess.run([str(BIN / "graphroute"), "ask", "--index", str(carol_path), "Who is Bob Cratchit?"],
                          env=_env(model), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Bob Cratchit is Scrooge's clerk" in done.stdout, done.stderr
    assert done.stderr == ""


def test_route_bench_exits_cleanly(model: LoopbackServer, carol_path: Path, tmp_path: Path) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("Who is Bob Cratchit?\nWhat are the main themes of the story?\n")
    done = subprocess.run([str(BIN / "route-bench"), "--index", str(carol_path), "--queries", str(questions),
                           "--engines", "local,router", "--model", "openai", "--out", str(tmp_path / "out"),
                           "--no-progress", "--quiet"],
                          env=_env(model), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert any((tmp_path / "out").iterdir())


def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_checks_its_endpoints_serves_and_shuts_down_cleanly(model: LoopbackServer, carol_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen([str(BIN / "graphroute"), "serve", "--index", f"carol={carol_path}", "--port", str(port)],
                            env=_env(model), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        while not (lines and "on http://" in lines[-1]):
            line = proc.stdout.readline()
            assert line, f"serve ended early: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line)
        assert lines[-1].startswith(f"graphroute serve: carol on http://127.0.0.1:{port} ")
        out = "".join(lines)
        assert f"chat gpt-4.1 at {model.base_url}: ok" in out and f"embedding text-embedding-3-large at " \
            f"{model.base_url}: ok" in out
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:  # at once: it is listening
            answer = client.post("/v1/ask", json={"question": "Who is Bob Cratchit?"})
            assert answer.status_code == 200 and "Scrooge's clerk" in answer.json()["text"]
            assert client.get("/healthz").json()["status"] == "ok"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    for bad in ("Unclosed", "unclosed", "Traceback", "Warning", "ERROR"):
        assert bad not in err, err


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_on_a_busy_port_is_one_line_and_exit_code_2(carol_path: Path, workers: int) -> None:
    with closing(socket.socket()) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        started = time.perf_counter()
        done = subprocess.run([str(BIN / "graphroute"), "serve", "--index", f"carol={carol_path}", "--port", str(port),
                               "--workers", str(workers)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (f"error: cannot listen on 127.0.0.1:{port}: the port is already in use (another server "
                           "listens there); stop it or choose another port with --port\n")
    assert "http://" not in done.stdout  # never printed as if serving
    assert time.perf_counter() - started < 60  # before any index is loaded
