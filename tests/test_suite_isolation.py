"""The suite's own set-up: tests never read or write the user's cache."""

from __future__ import annotations

import os
from pathlib import Path


def test_tests_use_a_temporary_cache_directory() -> None:
    cache = os.environ.get("GRAPHROUTE_CACHE_DIR")
    assert cache, "GRAPHROUTE_CACHE_DIR is not set inside the suite: tests would write to ~/.cache/graphroute"
    assert not Path(cache).resolve().is_relative_to(Path.home() / ".cache")
