"""Index data model, loaders, entity linking and the pure context builders every engine shares.

Importing the package is cheap: the heavy libraries (pandas, lancedb, scipy, tiktoken's encodings) are
imported inside the functions that need them, so `import router` does not pay for them.
"""

from __future__ import annotations

from shared_context.community_context import CommunityContextBuilder, CommunityContextParams, ReportBatch
from shared_context.errors import IndexFormatError
from shared_context.index import Index, VectorTable
from shared_context.linking import LinkedEntity, LinkResult, link_entities
from shared_context.loaders import load_index
from shared_context.local_context import LocalContext, LocalContextBuilder, LocalContextParams
from shared_context.tokens import Tokenizer, get_tokenizer

__all__ = [
    "CommunityContextBuilder",
    "CommunityContextParams",
    "Index",
    "IndexFormatError",
    "LinkResult",
    "LinkedEntity",
    "LocalContext",
    "LocalContextBuilder",
    "LocalContextParams",
    "ReportBatch",
    "Tokenizer",
    "VectorTable",
    "get_tokenizer",
    "link_entities",
    "load_index",
]
