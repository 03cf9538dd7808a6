"""Build a GraphRAG-v3 index from a folder of documents, offline or with a model.

Why a top-level package: building an index is a capability with its own home. It is not
query-time context (`shared_context` only reads and serves indexes and must never call a model)
and it is not an engine (`engines` answer questions over an index that already exists). The
indexer depends on both — the model layer for extraction and embeddings, the tokenizer and
loaders for compatibility — and nothing at query time depends on it.

Public names: `build_index`, `build_index_from_documents`, `IndexerConfig`, `IndexBuildReport`,
`SourceDocument`, `IndexerError`, `cli_main` (the `graphroute index` command), `build_arg_parser`.
Importing the package is cheap: the document readers (pypdf, python-docx), jieba and the graph
libraries are imported inside the functions that need them.
"""

from __future__ import annotations

from indexer.cli import build_arg_parser, cli_main
from indexer.config import IndexBuildReport, IndexerConfig, IndexerError
from indexer.pipeline import build_index, build_index_from_documents
from indexer.reader import SourceDocument, read_documents

__all__ = [
    "IndexBuildReport",
    "IndexerConfig",
    "IndexerError",
    "SourceDocument",
    "build_arg_parser",
    "build_index",
    "build_index_from_documents",
    "cli_main",
    "read_documents",
]
