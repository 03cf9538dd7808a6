"""Generators of the documentation site's reference pages: the configuration reference from the typed
configuration, and the benchmarks page from the committed result files. Never imported by the product."""
