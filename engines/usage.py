"""Re-export: usage accounting lives in the model layer (`engines.models.base`): the model layer and the
indexer record usage too, and they must not import the engines."""

from engines.models.base import STAGES, StageUsage, Usage

__all__ = ["STAGES", "StageUsage", "Usage"]
