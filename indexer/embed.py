"""Embeddings of entity descriptions, report contents and text units, stored as GraphRAG's LanceDB tables.

Texts follow GraphRAG (`{title}:{description}` for entities, `full_content` for reports, `text` for text
units). Tables are `lancedb/entity_description`, `community_full_content` and `text_unit_text`, each with
`id` (utf8) and `vector` (FixedSizeList<float32>[dim]). Without a configured embedder the offline
embedder is fitted on the corpus and saved in `graphroute/embedder.npz`, so query time embeds
questions into the same space; updates load it again (`load_offline_embedder`) rather than refitting,
and copy unchanged texts' vectors from the previous tables (`read_lancedb`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from engines.models.base import Embedder, Usage
from indexer.config import IndexerError
from indexer.state import EMBEDDER

EMBEDDER_FILE = EMBEDDER  # npz, read with allow_pickle=False
TABLES = ("entity_description", "community_full_content", "text_unit_text")


@dataclass
class EmbeddingJob:
    name: str
    ids: list[str]
    texts: list[str]


def fit_offline_embedder(corpus: list[str], dim: int, seed: int = 0) -> Embedder:
    """Fit the offline embedder (TF-IDF + SVD, from the model layer) on the corpus' texts."""
    try:
        from engines.models.embedding_offline import OfflineEmbedder
    except ImportError as exc:  # pragma: no cover - only when the model layer is incomplete
        raise IndexerError(f"the offline embedder is not available ({exc}); pass an embedder explicitly") from exc
    embedder: Embedder = OfflineEmbedder.fit(corpus, dim=dim, seed=seed)
    return embedder


def save_offline_embedder(embedder: Embedder, folder: Path) -> Path | None:
    save = getattr(embedder, "save", None)
    if save is None:
        return None
    path = folder / EMBEDDER_FILE
    save(path)
    return path


def keep_offline_embedder(previous: Path, folder: Path) -> Path:
    """The previous build's embedder file, unchanged, in `folder` (hard-linked when the file system allows,
    else copied): an update that keeps the embedder does not serialise its ~60 MB basis again."""
    path = folder / EMBEDDER_FILE
    path.unlink(missing_ok=True)
    try:
        os.link(previous, path)  # the old folder is deleted after the swap; the link keeps the data
    except OSError:
        shutil.copyfile(previous, path)
    return path


def load_offline_embedder(path: Path) -> Embedder | None:
    """The offline embedder an index was built with, or None when the file is unreadable or foreign."""
    from engines.models.embedding_offline import OfflineEmbedder
    from engines.models.errors import ModelConfigError

    try:
        embedder: Embedder = OfflineEmbedder.load(path)
    except (ModelConfigError, OSError, ValueError):
        return None
    return embedder


def read_lancedb(folder: Path, dim: int) -> dict[str, dict[str, np.ndarray]]:
    """table -> id -> vector of a previous build's tables of width `dim` ({} for a missing or other table)."""
    if not folder.is_dir():
        return {}
    os.environ.setdefault("LANCEDB_LOG", "error")
    import lancedb

    out: dict[str, dict[str, np.ndarray]] = {}
    try:
        db = lancedb.connect(str(folder))
        for name in TABLES:
            table = db.open_table(name).to_arrow()
            vectors = table.column("vector").combine_chunks()
            if vectors.type.list_size != dim:
                continue
            matrix = vectors.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32)
            out[name] = dict(zip(table.column("id").to_pylist(), matrix, strict=True))
    except (OSError, ValueError, KeyError, AttributeError):
        return {}  # unreadable vectors are simply embedded again
    return out


async def embed_jobs(
    embedder: Embedder,
    jobs: list[EmbeddingJob],
    *,
    batch_size: int,
    usage: Usage,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, np.ndarray]:
    """Embed every job in batches; returns name -> float32 (n, dim) matrix."""
    out: dict[str, np.ndarray] = {}
    for job in jobs:
        parts: list[np.ndarray] = []
        for start in range(0, len(job.texts), batch_size):
            batch = job.texts[start : start + batch_size]
            result = await embedder.embed(batch)
            usage.add_embedding("embed", result)
            vectors = np.asarray(result.vectors, dtype=np.float32)
            if vectors.shape != (len(batch), embedder.dim):
                raise IndexerError(
                    f"embedder {embedder.name} returned shape {vectors.shape} for {len(batch)} texts "
                    f"(expected ({len(batch)}, {embedder.dim}))"
                )
            parts.append(vectors)
            if on_batch is not None:
                on_batch(len(batch))
        out[job.name] = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    return out


def write_lancedb(folder: Path, ids: dict[str, list[str]], vectors: dict[str, np.ndarray], dim: int) -> None:
    """(Re)create the three tables; a stale database folder is replaced, never appended to."""
    os.environ.setdefault("LANCEDB_LOG", "error")  # lance logs a WARN for every table it creates
    import lancedb

    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    db = lancedb.connect(str(tmp))
    schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), dim))])
    for name in TABLES:
        matrix = np.ascontiguousarray(vectors[name], dtype=np.float32)
        flat = pa.array(matrix.reshape(-1), type=pa.float32())
        table = pa.Table.from_arrays(
            [pa.array(ids[name], type=pa.string()), pa.FixedSizeListArray.from_arrays(flat, dim)], schema=schema
        )
        db.create_table(name, data=table, mode="overwrite")
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
