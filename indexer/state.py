"""What the indexer keeps between runs, in `INDEX/graphroute/`. Data only: nothing here is ever unpickled.

- `manifest.json`: settings, extraction mode, embedder, documents and chunk ids of the last build,
  package versions, counts and the sha256 of every table written with it (checked at load, so a
  folder whose tables come from different builds is refused). Its presence marks a graphroute index.
- `extractions.json.gz`: per-chunk extraction results (offline mentions/pairs or the model's parsed
  entities, relationships and claims) as typed JSON (`indexer.jsoncodec`), so an incremental run
  only extracts new chunks.
- `embedder.npz`: the offline embedder (see `engines.models.embedding_offline`), read with
  `allow_pickle=False`. Fitted once per index and kept by updates (refitted only on request), so
  stored vectors stay comparable with new ones.
- `embedded.json.gz`: the sha256 of the text behind every stored vector and the embedder's
  fingerprint, so an update embeds only new or changed texts and copies the other vectors.
- `model_reports.json.gz`: model-written community reports keyed by the digest of their model and
  input context, so an update asks the model only about communities whose context changed.

Files left by older versions (`extractions.pkl`, `embedder.joblib`) are never opened: they are named
in the build's warnings so the user can delete them.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from indexer.config import FORMAT_VERSION, IndexerError
from indexer.jsoncodec import CodecError, decode, encode

STATE_DIR = "graphroute"
MANIFEST = "manifest.json"
EXTRACTIONS = "extractions.json.gz"
EMBEDDER = "embedder.npz"
EMBEDDED = "embedded.json.gz"
MODEL_REPORTS = "model_reports.json.gz"
LEGACY_CODE_FILES = ("extractions.pkl", "embedder.joblib")  # older formats that could run code: never read
WRITTEN_BY_BUILD = (MANIFEST, EXTRACTIONS, EMBEDDER, EMBEDDED, MODEL_REPORTS)  # what a build (re)writes in STATE_DIR


@dataclass
class Manifest:
    settings: dict[str, Any]
    extraction: str
    embedder: dict[str, Any]
    documents: list[dict[str, str]]
    chunk_ids: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    updated: str = ""
    tables: dict[str, str] = field(default_factory=dict)  # file name -> sha256, all written together

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2, ensure_ascii=False)


def package_versions() -> dict[str, str]:
    out = {}
    for name in ("graphroute", "graspologic-native", "jieba", "tiktoken", "lancedb", "pyarrow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def read_manifest(out_dir: Path) -> Manifest | None:
    path = out_dir / STATE_DIR / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Manifest(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise IndexerError(f"{path}: unreadable previous manifest ({exc}); delete the folder to rebuild") from exc


def write_manifest(out_dir: Path, manifest: Manifest) -> None:
    _atomic_write(out_dir / STATE_DIR / MANIFEST, manifest.to_json().encode("utf-8"))


def table_digests(folder: Path) -> dict[str, str]:
    """sha256 of every table a build wrote in `folder` (and of its embedder), for `Manifest.tables`."""
    from shared_context.loaders.integrity import sha256_file

    files = sorted(folder.glob("*.parquet")) + sorted((folder / STATE_DIR).glob(EMBEDDER))
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in files}


def legacy_code_files(out_dir: Path) -> list[str]:
    """Older state files in a format that can execute code when loaded; they are ignored, never opened."""
    return [f"{STATE_DIR}/{n}" for n in LEGACY_CODE_FILES if (out_dir / STATE_DIR / n).exists()]


def read_extractions(out_dir: Path, mode: str, value_type: Any) -> dict[str, Any]:
    """Stored per-chunk results (each a `value_type`) for `mode`, or {} when absent or of another mode."""
    path = out_dir / STATE_DIR / EXTRACTIONS
    if not path.exists():
        return {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, EOFError, ValueError) as exc:
        raise IndexerError(f"{path}: unreadable stored extractions ({exc}); delete it to re-extract") from exc
    if not isinstance(data, dict) or data.get("mode") != mode:
        return {}
    try:
        return decode(dict[str, value_type], data.get("chunks", []))  # type: ignore[no-any-return]
    except CodecError:
        return {}  # e.g. written by another extractor version: re-extracting is always correct, only slower


def write_extractions(out_dir: Path, mode: str, chunks: dict[str, Any]) -> None:
    text = json.dumps({"mode": mode, "chunks": encode(chunks)}, ensure_ascii=False, separators=(",", ":"))
    _atomic_write(out_dir / STATE_DIR / EXTRACTIONS, gzip.compress(text.encode("utf-8"), compresslevel=5, mtime=0))


@dataclass
class EmbeddedTexts:
    """Which text each stored vector was computed from, and by which embedder, so an update re-embeds only
    texts that are new or changed (`embedder` is the embedder's fingerprint; `digests`: table -> id -> sha256)."""

    embedder: str
    digests: dict[str, dict[str, str]] = field(default_factory=dict)


def read_reusable(out_dir: Path, name: str, kind: Any) -> Any:
    """A stored `kind` value that only saves work (embedded texts, model reports), or None when absent or
    unreadable: redoing the work is always correct."""
    path = out_dir / STATE_DIR / name
    if not path.exists():
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return decode(kind, json.load(fh))
    except (OSError, EOFError, ValueError, CodecError):
        return None


def write_reusable(out_dir: Path, name: str, value: Any) -> None:
    text = json.dumps(encode(value), ensure_ascii=False, separators=(",", ":"))
    _atomic_write(out_dir / STATE_DIR / name, gzip.compress(text.encode("utf-8"), compresslevel=5, mtime=0))


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
