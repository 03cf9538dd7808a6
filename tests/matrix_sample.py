"""The seeded sample of the fault and corruption matrices that a normal test run takes.

Each run draws a new seed (or takes `GRAPHROUTE_MATRIX_SEED`) and pytest prints it in its header, so a failure
seen once can be repeated exactly; `GRAPHROUTE_HYPOTHESIS_PROFILE=long` runs the matrices whole.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

SEED = int(os.environ.get("GRAPHROUTE_MATRIX_SEED") or secrets.randbelow(1_000_000))
LONG = os.environ.get("GRAPHROUTE_HYPOTHESIS_PROFILE", "default") == "long"


def sample(cases: Sequence[T], k: int, salt: str) -> list[T]:
    """`k` cases drawn with this run's seed (all of them under the long profile); `salt` keeps two matrices'
    draws apart."""
    if LONG or k >= len(cases):
        return list(cases)
    return random.Random(f"{SEED}:{salt}").sample(list(cases), k)
