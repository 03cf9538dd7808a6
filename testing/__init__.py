"""Test and benchmark tooling: the product never imports it and the wheel does not ship it.

`testing.model_server.LoopbackServer` is a loopback OpenAI-compatible model server (127.0.0.1 only): tests
drive the real clients against it, and benchmarks (`route-bench --model mock:...`, `serve_load`) use it to put
a realistic per-call latency behind real HTTP. Importable from a source checkout (the repository root is on
`sys.path` for pytest and for `python -m benchmarks....`).
"""
