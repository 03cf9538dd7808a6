"""Test tooling: the product never imports it and the wheel does not ship it.

`testing.model_server.LoopbackServer` is the loopback OpenAI-compatible model server the tests drive the real
clients against (127.0.0.1 only): route-bench's simulated model (`benchmarks.simulated_model`, shipped) plus the
fault injection only tests script. Importable from a source checkout (pytest puts the repository root on
`sys.path`).
"""
