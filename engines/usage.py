"""Re-export: usage accounting lives in `engines.models.usage` (the model layer and the indexer record
usage too, and they must not import the engines)."""

from engines.models.usage import STAGES, StageUsage, Usage

__all__ = ["STAGES", "StageUsage", "Usage"]
