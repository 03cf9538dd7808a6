"""Starting `graphroute serve` when something is wrong: a model endpoint whose check fails in any way (an address
with credentials the client refuses, an embeddings reply without vectors) starts the service degraded with a
one-line reason and no credential in it; a `--workers` supervisor killed with SIGKILL leaves a run folder
that the next server removes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from engines.config import GraphrouteConfig
from engines.models.config import models_config_from_mapping
from router import Router
from router.service import Service, ServiceThread
from router.service.run_dir import OWNER, PREFIX, make_run_dir, remove_orphans
from testing.model_server import Fault, LoopbackServer

# ---- 7. a failed start-up probe: degraded, not dead -----------------------------------------------------


def _service(carol_path: Path, models: dict[str, object]) -> Service:
    config = GraphrouteConfig(models=models_config_from_mapping(models, {}))
    return Service({"carol": Router.from_index(carol_path, config=config)})


def test_credentials_in_the_address_start_degraded_with_one_line(carol_path: Path) -> None:
    with LoopbackServer(latency_ms=0) as model:
        url = model.base_url.replace("://", "://user:pa55-w0rd-secret@")
        service = _service(carol_path, {"chat": {"provider": "openai", "model": "gpt-4.1-mini", "base_url": url,
                                                 "api_key": "sk-probe-key-0123456789"}})
        lines = service.check_endpoints()
        with ServiceThread(service) as svc:
            health = httpx.get(svc.url + "/healthz", timeout=30)
    assert lines and all("\n" not in line for line in lines)
    assert not any("pa55-w0rd-secret" in line or "sk-probe-key" in line for line in lines)
    assert health.status_code == 200 and health.json()["status"] in ("ok", "degraded")


def test_an_embedding_reply_without_vectors_starts_degraded(carol_path: Path) -> None:
    with LoopbackServer(latency_ms=0) as model:
        model.fail_next(10, Fault("no_embedding"))
        service = _service(carol_path, {"embedding": {"provider": "openai", "model": "text-embedding-3-small",
                                                      "base_url": model.base_url, "api_key": "sk-embed-0123456789"}})
        lines = service.check_endpoints()
        with ServiceThread(service) as svc:
            health = httpx.get(svc.url + "/healthz", timeout=30).json()
    assert health["status"] == "degraded"
    failed = [line for line in lines if line.startswith("embedding")]
    assert failed and "error" in failed[0] and "\n" not in failed[0]


# ---- 10. the run folder of a killed supervisor ----------------------------------------------------------

def test_a_run_folder_whose_owner_is_gone_is_removed_by_the_next_server(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = tmp_path / f"{PREFIX}orphan"
    orphan.mkdir(mode=0o700)
    (orphan / OWNER).write_text(str(gone.pid))
    (orphan / "admission").write_bytes(b"\0" * 64)
    living = tmp_path / f"{PREFIX}living"
    living.mkdir(mode=0o700)
    (living / OWNER).write_text(str(os.getppid()))
    mine = make_run_dir(tmp_path)
    assert not orphan.exists() and living.exists() and mine.exists()
    assert (mine / OWNER).read_text() == str(os.getpid())
    assert remove_orphans(tmp_path) == []


def test_kill_9_of_the_supervisor_then_a_new_server_cleans_up(carol_path: Path, tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "router.cli", "serve", "--index", f"carol={carol_path}", "--port", "0",
           "--workers", "2"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        assert proc.stdout is not None
        for line in proc.stdout:  # the run folder is made before the workers start
            if "starting 2 workers" in line or time.monotonic() > deadline:
                break
        folders = list(tmp_path.glob(PREFIX + "*"))
        assert len(folders) == 1 and (folders[0] / OWNER).read_text() == str(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert folders[0].exists()  # SIGKILL left it behind (its workers drain and exit on their own)
        assert remove_orphans(tmp_path) == [folders[0]]
    finally:
        with contextlib.suppress(ProcessLookupError):  # the supervisor and any worker it had spawned
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
