"""Build a GraphRAG-v3 index from a folder of documents, offline or with a model.

Why a top-level package: building an index is a capability with its own home. It is not
query-time context (`shared_context` only reads and serves indexes and must never call a model)
and it is not an engine (`engines` answer questions over an index that already exists). The
indexer depends on both — the model layer for extraction and embeddings, the tokenizer and
loaders for compatibility — and nothing at query time depends on it.

Public names: `build_index`, `build_index_from_documents`, `IndexerConfig`, `IndexBuildReport`,
`SourceDocument`, `IndexerError`, `cli_main` (the `graphroute index` command), `build_arg_parser`.
Imports are lazy so `import indexer` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real types for mypy; at run time the names load on first use (below)
    from indexer.cli import build_arg_parser as build_arg_parser
    from indexer.cli import cli_main as cli_main
    from indexer.config import IndexBuildReport as IndexBuildReport
    from indexer.config import IndexerConfig as IndexerConfig
    from indexer.config import IndexerError as IndexerError
    from indexer.pipeline import build_index as build_index
    from indexer.pipeline import build_index_from_documents as build_index_from_documents
    from indexer.reader import SourceDocument as SourceDocument
    from indexer.reader import read_documents as read_documents

_EXPORTS = {
    "build_index": "indexer.pipeline",
    "build_index_from_documents": "indexer.pipeline",
    "IndexerConfig": "indexer.config",
    "IndexBuildReport": "indexer.config",
    "IndexerError": "indexer.config",
    "SourceDocument": "indexer.reader",
    "read_documents": "indexer.reader",
    "cli_main": "indexer.cli",
    "build_arg_parser": "indexer.cli",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'indexer' has no attribute {name!r}")
