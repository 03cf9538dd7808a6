"""Index data model, loaders, entity linking and the pure context builders every engine shares.

Public names: `load_index`, `Index`, `IndexFormatError`, `LocalContextBuilder`, `CommunityContextBuilder`.
Imports are lazy so that `import shared_context` stays cheap (the router's classifier imports it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real types for mypy; at run time the names load on first use (below)
    from shared_context.community_context import CommunityContextBuilder as CommunityContextBuilder
    from shared_context.community_context import CommunityContextParams as CommunityContextParams
    from shared_context.community_context import ReportBatch as ReportBatch
    from shared_context.errors import IndexFormatError as IndexFormatError
    from shared_context.index import Index as Index
    from shared_context.index import VectorTable as VectorTable
    from shared_context.linking import LinkedEntity as LinkedEntity
    from shared_context.linking import LinkResult as LinkResult
    from shared_context.linking import link_entities as link_entities
    from shared_context.loaders import load_index as load_index
    from shared_context.local_context import LocalContext as LocalContext
    from shared_context.local_context import LocalContextBuilder as LocalContextBuilder
    from shared_context.local_context import LocalContextParams as LocalContextParams
    from shared_context.tokens import Tokenizer as Tokenizer
    from shared_context.tokens import get_tokenizer as get_tokenizer

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
