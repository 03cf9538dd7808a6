"""A small GraphRAG-v3 index built at test time by the offline indexer (tables and LanceDB vectors), for tests
that need an index folder of their own to copy, change or upload."""

from __future__ import annotations

from pathlib import Path

DOCS = {
    "harbour.txt": "Captain Ada Marsh runs the Northgate Harbour. The harbour trades fish with Port Elling. "
                   "Ada Marsh hired Tom Reyes as her pilot. Tom Reyes grew up in Port Elling.",
    "market.txt": "The Port Elling market sells fish from Northgate Harbour. Mayor Lina Cho opened the market. "
                  "Lina Cho and Ada Marsh signed the harbour treaty together.",
}


def build_small_index(folder: Path) -> Path:
    """Index `DOCS` into `folder / "index"` and return that folder."""
    from indexer import build_index

    src = folder / "docs"
    src.mkdir(parents=True)
    for name, text in DOCS.items():
        (src / name).write_text(text, encoding="utf-8")
    build_index(src, folder / "index", progress=False)
    return folder / "index"
