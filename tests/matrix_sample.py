"""The seeded sample of the fault and corruption matrices that a normal test run takes, and the Hypothesis
profiles.

The seed is fixed, so every run of a commit takes the same sample and a commit passes or fails every time, not by
luck; `GRAPHROUTE_MATRIX_SEED=N` takes another sample, and `GRAPHROUTE_HYPOTHESIS_PROFILE=long` (`make test-long`,
which CI runs as well) the matrices whole. pytest prints the seed and the profile in its header.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import TypeVar

from hypothesis import HealthCheck, settings

T = TypeVar("T")

FIXED_SEED = 1
SEED = int(os.environ.get("GRAPHROUTE_MATRIX_SEED") or FIXED_SEED)
PROFILE = os.environ.get("GRAPHROUTE_HYPOTHESIS_PROFILE", "default")
LONG = PROFILE == "long"


def load_hypothesis_profile() -> None:
    """Both profiles derandomised (examples drawn from a fixed seed per test, no example database), so two runs
    of a commit try the same examples; `long` tries many more."""
    common = {"deadline": None, "derandomize": True, "database": None,
              "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}
    settings.register_profile("default", max_examples=5, **common)
    settings.register_profile("long", max_examples=120, **common)
    settings.load_profile(PROFILE)


def sample(cases: Sequence[T], k: int, salt: str) -> list[T]:
    """`k` cases drawn with this run's seed (all of them under the long profile); `salt` keeps two matrices'
    draws apart."""
    if LONG or k >= len(cases):
        return list(cases)
    return random.Random(f"{SEED}:{salt}").sample(list(cases), k)
