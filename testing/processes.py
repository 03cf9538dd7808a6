"""Real servers for tests and benchmarks, each on a loopback port chosen free when it starts: Debian's
`redis-server` and `haproxy`, and `graphroute serve` replicas as a user runs them. Each is a context manager
that stops what it started.

    with RedisServer() as redis, Replica(config_path, index) as a, Replica(config_path_b, index) as b, \\
            HAProxy(CONFIG, {"GRAPHROUTE_REPLICA_A": a.address, ...}) as lb:
        httpx.get(lb.url + "/v1/ask", ...)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing_binaries(*names: str) -> list[str]:
    return [name for name in names if shutil.which(name) is None]


def _wait(check: object, what: str, timeout: float, process: subprocess.Popen[bytes]) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} while starting")
        try:
            if callable(check) and check():
                return
        except (OSError, httpx.HTTPError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start within {timeout:g} s")


class _Process:
    process: subprocess.Popen[bytes]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Stop it (SIGTERM: a clean stop; SIGKILL: as if its host died); its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisServer(_Process):
    """`redis-server` on 127.0.0.1:<free port>, in memory only (no snapshot file)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--protected-mode", "yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(self._answers, "redis-server", 10, self.process)
        return self

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def __enter__(self) -> RedisServer:
        return self.start()


class S3Server(_Process):
    """moto's S3-compatible server (`moto.server`, from PyPI) on 127.0.0.1:<free port>. `env` may enable its
    IAM checks (`INITIAL_NO_AUTH_ACTION_COUNT`: that many requests are allowed before credentials are checked)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **(env or {})}

    def start(self) -> S3Server:
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: httpx.get(self.url + "/moto-api/", timeout=2).status_code == 200, "moto server", 30,
              self.process)
        return self

    def __enter__(self) -> S3Server:
        return self.start()


class Replica(_Process):
    """`graphroute serve` with a graphroute.toml, on its own free port; started when its `/readyz` says ready."""

    def __init__(self, command: list[str], port: int, env: dict[str, str] | None = None,
                 log: Path | None = None) -> None:
        self.command, self.port, self.env = command, port, env
        self.address = f"127.0.0.1:{port}"
        self.url = f"http://{self.address}"
        self.log = log

    def launch(self) -> Replica:
        """Start the process (`wait_ready` waits for it: several replicas may start side by side)."""
        if self.log is None:
            self.process = subprocess.Popen(self.command, env=self.env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.STDOUT)
        else:
            with open(self.log, "ab") as out:  # the child keeps its own copy of the descriptor
                self.process = subprocess.Popen(self.command, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout: float = 120.0) -> Replica:
        _wait(lambda: httpx.get(self.url + "/readyz", timeout=2).status_code == 200, "graphroute serve",
              timeout, self.process)
        return self

    def start(self, timeout: float = 120.0) -> Replica:
        return self.launch().wait_ready(timeout)

    def __enter__(self) -> Replica:
        return self.start()


class HAProxy(_Process):
    """`haproxy` running `config` (a file whose `${NAME}`s come from `env`), its front end on a free port."""

    def __init__(self, config: Path, env: dict[str, str], address_variable: str = "GRAPHROUTE_LB_ADDRESS") -> None:
        self.config = config
        self.port = free_port()
        self.env = {**os.environ, **env, address_variable: f"127.0.0.1:{self.port}"}
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = tempfile.TemporaryDirectory(prefix="graphroute-haproxy-")

    def start(self) -> HAProxy:
        check = subprocess.run(["haproxy", "-c", "-q", "-f", str(self.config)], env=self.env, capture_output=True,
                               text=True, timeout=30)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refuses {self.config}: {check.stdout}{check.stderr}")
        self.process = subprocess.Popen(["haproxy", "-db", "-f", str(self.config)], env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self._dir.name)
        _wait(lambda: httpx.get(self.url + "/healthz", timeout=2).status_code in (200, 503), "haproxy", 10,
              self.process)
        return self

    def __enter__(self) -> HAProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop(signal.SIGUSR1)  # haproxy's soft stop
        self._dir.cleanup()


def unit_command(unit: Path, variables: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """A systemd unit's ExecStart as this interpreter runs it, and its Environment= settings: `${NAME}`s are
    replaced from `variables` (what its EnvironmentFile would hold) and the installed `graphroute` program
    by this interpreter's `-m router.cli`."""
    import re
    import shlex

    exec_start, env = "", {}
    for line in unit.read_text().splitlines():
        if line.startswith("ExecStart="):
            exec_start = line.removeprefix("ExecStart=")
        elif line.startswith("Environment="):
            name, _, value = line.removeprefix("Environment=").partition("=")
            env[name] = value
    words = [re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], w) for w in shlex.split(exec_start)]
    if not words or Path(words[0]).name != "graphroute":
        raise ValueError(f"{unit}: ExecStart does not run graphroute: {exec_start!r}")
    return [sys.executable, "-m", "router.cli", *words[1:]], env


@contextlib.asynccontextmanager
async def mcp_http_server(root: Path, *args: str) -> AsyncIterator[str]:
    """`graphroute mcp --http` on a free loopback port with `args` (indexes, --config), run in `root` with its
    own model cache and no model settings from this environment; yields the server's MCP URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "GRAPHROUTE_"))}
    env["GRAPHROUTE_CACHE_DIR"] = str(root / "cache")
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "mcp", "--http", "--port", str(port), *args],
                            env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 180)
        assert line.startswith("graphroute mcp:"), line + proc.stderr.read()
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def shared_state_config(path: Path, model_url: str, redis_url: str, keys: tuple[str, ...], *, calls_per_day: int,
                        lease_s: float, warm_rows: int, extra: str = "") -> Path:
    """A `graphroute.toml` for serves that share one Redis: the loopback chat model, offline embeddings, the
    API keys, at most 4 questions in flight per key and `calls_per_day` model calls per key; `extra` adds lines
    to `[serve]`."""
    listed = ", ".join(f'"{key}"' for key in keys)
    path.write_text(f"""
[models.chat]
base_url = "{model_url}"
api_key = "x"
model = "gpt-4.1"
concurrency = 16

[models.embedding]
provider = "offline"

[serve]
api_keys = [{listed}]
redis_url = "{redis_url}"
redis_lease_s = {lease_s}
max_concurrency = 32
max_concurrency_per_key = 4
max_calls_per_day = {calls_per_day}
warm_rows = {warm_rows}
shutdown_grace_s = 5.0
{extra}""", encoding="utf-8")
    return path
