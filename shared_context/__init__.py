"""Index data model, loaders, entity linking and the pure context builders every engine shares.

Public names: `load_index`, `Index`, `IndexFormatError`, `LocalContextBuilder`, `CommunityContextBuilder`.
Imports are lazy so that `import shared_context` stays cheap (the router's classifier imports it).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_index": "shared_context.loaders",
    "Index": "shared_context.index",
    "VectorTable": "shared_context.index",
    "IndexFormatError": "shared_context.errors",
    "LocalContextBuilder": "shared_context.local_context",
    "LocalContextParams": "shared_context.local_context",
    "LocalContext": "shared_context.local_context",
    "CommunityContextBuilder": "shared_context.community_context",
    "CommunityContextParams": "shared_context.community_context",
    "ReportBatch": "shared_context.community_context",
    "link_entities": "shared_context.linking",
    "LinkResult": "shared_context.linking",
    "LinkedEntity": "shared_context.linking",
    "Tokenizer": "shared_context.tokens",
    "get_tokenizer": "shared_context.tokens",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'shared_context' has no attribute {name!r}")
