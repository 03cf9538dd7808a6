"""Release check: the installed wheel works as a user runs it, with no source checkout importable.

Run by `.ci/release-check` with the python of a clean virtual environment where only the wheel is installed, from
a working folder outside the repository (so neither the checkout nor `testing/` is on `sys.path`):

    python release_check.py SAMPLE_CORPUS WORK_DIR

It builds an index of the sample corpus (`graphroute index`), answers a question (`graphroute ask`), has
`graphroute serve` answer one chat-completions request, lists `graphroute mcp`'s tools over stdio, and runs
`route-bench --model mock:10` on two questions. Each step prints its time; any failure exits non-zero with the
command's output.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

BIN = Path(sys.executable).parent
QUESTION = "Who leads the Saltbridge Battery Project?"
MCP_TOOLS = {"ask", "route", "search_local", "search_global", "search_basic", "entity", "list_indexes"}


class CheckFailed(Exception):
    pass


def run(*args: str, timeout: float = 600) -> str:
    """Run an installed console script; its stdout, or CheckFailed with everything it printed."""
    done = subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise CheckFailed(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http(url: str, body: dict[str, object] | None = None) -> dict[str, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        result: dict[str, object] = json.loads(response.read())
        return result


def check_serve(index: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([str(BIN / "graphroute"), "serve", "--index", f"sample={index}", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise CheckFailed(f"graphroute serve exited {server.returncode}\n{server.communicate()[0]}")
            try:
                http(f"{base}/healthz")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise CheckFailed("graphroute serve did not answer /healthz within 120 s") from None
                time.sleep(0.5)
        reply = http(f"{base}/v1/chat/completions",
                     {"model": "graphroute", "messages": [{"role": "user", "content": QUESTION}]})
        choices = reply.get("choices")
        content = choices[0]["message"]["content"] if isinstance(choices, list) and choices else ""
        if not content:
            raise CheckFailed(f"graphroute serve answered without content: {reply}")
        print(f"  serve answered: {str(content)[:100]!r}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def check_mcp(index: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def tools() -> set[str]:
        params = StdioServerParameters(command=str(BIN / "graphroute"), args=["mcp", "--index", f"sample={index}"])
        async with Client(params, read_timeout_seconds=120) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    names = asyncio.run(tools())
    if not names >= MCP_TOOLS:
        raise CheckFailed(f"graphroute mcp lists {sorted(names)}, missing {sorted(MCP_TOOLS - names)}")
    print(f"  mcp tools: {', '.join(sorted(names))}")


def check_route_bench(index: Path, out: Path) -> None:
    run("route-bench", "--index", str(index), "--queries", "builtin:sample_corpus", "--limit", "2",
        "--model", "mock:10", "--out", str(out), "--no-progress", "--quiet")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    questions = {row["query_id"] for row in report["rows"]}
    failed = [row for row in report["rows"] if not row["ok"]]
    served = report["model"]["mock_server"]
    if len(questions) != 2 or failed or not served["chat_requests"] or served["failed_requests"]:
        raise CheckFailed(f"route-bench ran {len(questions)} questions, {len(failed)} rows failed ({failed[:2]}); "
                          f"simulated model: {served}")
    print(f"  route-bench: {len(report['rows'])} rows over 2 questions, {served['chat_requests']} chat requests "
          "to the simulated model")


def main(argv: list[str]) -> int:
    corpus, work = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    index = work / "index"
    steps: list[tuple[str, Callable[[], object]]] = [
        ("graphroute index", lambda: run("graphroute", "index", str(corpus), "--out", str(index), "--no-progress")),
        ("graphroute ask", lambda: print("  ask answered:", repr(run("graphroute", "ask", "--index", str(index),
                                                                          QUESTION)[:100]))),
        ("graphroute serve", lambda: check_serve(index)),
        ("graphroute mcp", lambda: check_mcp(index)),
        ("route-bench --model mock:10", lambda: check_route_bench(index, work / "route-bench")),
    ]
    for name, step in steps:
        started = time.monotonic()
        try:
            step()
        except (CheckFailed, subprocess.TimeoutExpired) as exc:
            print(f"release check FAILED at {name}: {exc}", file=sys.stderr)
            return 1
        print(f"release check: {name} ok ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
