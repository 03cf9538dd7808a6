"""What the indexer keeps between runs, in `INDEX/graphroute/`.

- `manifest.json`: settings, extraction mode, embedder, documents and chunk ids of the last build,
  package versions and counts. It is written last, so its presence means the build completed.
- `extractions.pkl`: per-chunk extraction results (offline mentions/pairs or the model's parsed
  entities, relationships and claims), so an incremental run only extracts new chunks.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from indexer.config import FORMAT_VERSION, IndexerError

STATE_DIR = "graphroute"
MANIFEST = "manifest.json"
EXTRACTIONS = "extractions.pkl"


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


def read_extractions(out_dir: Path, mode: str) -> dict[str, Any]:
    """Stored per-chunk results for `mode`, or {} when absent or made by another extraction mode."""
    path = out_dir / STATE_DIR / EXTRACTIONS
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            data = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
        raise IndexerError(f"{path}: unreadable stored extractions ({exc}); delete it to re-extract") from exc
    if not isinstance(data, dict) or data.get("mode") != mode:
        return {}
    chunks: dict[str, Any] = data.get("chunks", {})
    return chunks


def write_extractions(out_dir: Path, mode: str, chunks: dict[str, Any]) -> None:
    payload = pickle.dumps({"mode": mode, "chunks": chunks}, protocol=pickle.HIGHEST_PROTOCOL)
    _atomic_write(out_dir / STATE_DIR / EXTRACTIONS, payload)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
