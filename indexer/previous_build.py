"""An update's view of the index it replaces: what the previous build left, read so that only what changed is
redone (documents and chunks keep their order and ids, stored extractions are copied, communities re-clustered
only where the graph changed), and why a full rebuild is needed instead."""

from __future__ import annotations

from pathlib import Path

from indexer.chunking import Chunk
from indexer.communities import CommunityRow, PreviousEdges
from indexer.config import IndexerConfig, IndexerError
from indexer.extract_offline import ChunkExtraction
from indexer.graph import entity_uuid
from indexer.jsoncodec import CodecError
from indexer.reader import SourceDocument
from indexer.state import (
    CHUNK_SPANS,
    EXTRACTIONS,
    STATE_DIR,
    ExtractionWriter,
    Manifest,
    StoredSpans,
    decode_extraction_line,
    iter_extraction_lines,
    read_members,
    read_reusable,
)

OUTPUT_TABLES = ("entities", "relationships", "communities", "community_reports", "text_units", "documents")


class PreviousBuild:
    """The index at `out` as its last build left it (`manifest` None: there is none to update, build it all)."""

    def __init__(self, out: Path, manifest: Manifest | None, config: IndexerConfig, mode: str) -> None:
        self.out = out
        self.manifest = manifest
        self.config = config
        self.mode = mode  # the extraction this build runs (`_Builder.mode`)

    def rebuild_reason(self) -> str:
        """Why the previous build cannot be updated ('' when it can, or when there is none)."""
        previous = self.manifest
        if previous is None:
            return ""
        old = {k: previous.settings.get(k) for k in self.config.chunking_settings()}
        if old != self.config.chunking_settings():
            return f"chunking settings changed from {old} to {self.config.chunking_settings()}"
        if previous.extraction != self.mode:
            return f"extraction changed from {previous.extraction} to {self.mode}"
        missing = [t for t in OUTPUT_TABLES if not (self.out / f"{t}.parquet").exists()]
        if missing:
            return f"previous output is incomplete (missing {', '.join(missing)})"
        return ""

    def ordered_documents(self, documents: list[SourceDocument]) -> list[SourceDocument]:
        """Documents of the previous build keep their order (and human_readable_id); new ones follow."""
        if self.manifest is None:
            return list(documents)
        rank = {d["id"]: i for i, d in enumerate(self.manifest.documents)}
        return sorted(documents, key=lambda d: (0, rank[d.id]) if d.id in rank else (1, 0))

    def ordered_chunks(self, chunks: list[Chunk]) -> list[Chunk]:
        if self.manifest is None:
            return chunks
        rank = {cid: i for i, cid in enumerate(self.manifest.chunk_ids)}
        return sorted(chunks, key=lambda c: (0, rank[c.id]) if c.id in rank else (1, 0))

    def unchanged(self, documents: list[SourceDocument], chunks: list[Chunk], embedder: str) -> bool:
        """The same documents, chunks, embedder and settings as the previous build: nothing to do."""
        previous = self.manifest
        return previous is not None and (
            [d["id"] for d in previous.documents] == [d.id for d in documents]
            and [d["title"] for d in previous.documents] == [d.title for d in documents]
            and previous.chunk_ids == [c.id for c in chunks]
            and previous.embedder.get("requested") == embedder
            and previous.settings == self.config.to_dict()
            and (self.out / "lancedb").is_dir()
        )

    def spans(self) -> dict[str, list[tuple[int, int, int]]]:
        """Where the previous build cut each document, when it chunked with the same settings."""
        stored = read_reusable(self.out, CHUNK_SPANS, StoredSpans) if self.manifest is not None else None
        if stored is None or stored.settings != self.config.chunking_settings():
            return {}
        return dict(stored.spans)

    def order(self) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        """The previous build's human_readable_id per entity title and per relationship (source, target)."""
        if self.manifest is None:
            return {}, {}
        import pyarrow.parquet as pq

        try:
            ents = pq.read_table(self.out / "entities.parquet", columns=["title", "human_readable_id"])
            rels = pq.read_table(self.out / "relationships.parquet", columns=["source", "target", "human_readable_id"])
        except (OSError, KeyError, ValueError) as exc:
            raise IndexerError(f"{self.out}: cannot read the previous tables ({exc}); delete the folder to rebuild") from exc
        titles = ents.column("title").to_pylist()
        pairs = zip(rels.column("source").to_pylist(), rels.column("target").to_pylist(), strict=True)
        return (
            {str(t): int(h) for t, h in zip(titles, ents.column("human_readable_id").to_pylist(), strict=True)},
            {(str(a), str(b)): int(h) for (a, b), h in zip(pairs, rels.column("human_readable_id").to_pylist(), strict=True)},
        )

    def communities(self) -> list[CommunityRow] | None:
        """The previous build's communities (structure only), so an update re-clusters only what changed."""
        if self.manifest is None:
            return None
        import pyarrow.parquet as pq

        try:
            t = pq.read_table(self.out / "communities.parquet",
                              columns=["community", "level", "parent", "entity_ids", "relationship_ids"])
        except (OSError, KeyError, ValueError) as exc:
            raise IndexerError(f"{self.out}: cannot read the previous communities ({exc}); delete the folder to rebuild") from exc
        return [
            CommunityRow(community=int(c), level=int(lv), parent=int(p), entity_ids=list(e), relationship_ids=list(r))
            for c, lv, p, e, r in zip(*(t.column(n).to_pylist() for n in t.column_names), strict=True)
        ]

    def edges(self) -> PreviousEdges | None:
        """The previous build's relationships (id -> source id, target id, weight): what the update changed."""
        if self.manifest is None:
            return None
        import pyarrow.parquet as pq

        try:
            t = pq.read_table(self.out / "relationships.parquet", columns=["id", "source", "target", "weight"])
        except (OSError, KeyError, ValueError) as exc:
            raise IndexerError(f"{self.out}: cannot read the previous relationships ({exc}); delete the folder to rebuild") from exc
        ids = {title: entity_uuid(title) for title in set(t.column("source").to_pylist()) | set(t.column("target").to_pylist())}
        return {
            str(rid): (ids[a], ids[b], float(w))
            for rid, a, b, w in zip(*(t.column(n).to_pylist() for n in ("id", "source", "target", "weight")), strict=True)
        }

    def ids(self, table: str) -> dict[str, int]:
        """id -> human_readable_id of the previous build's `table` (kept for rows that survive)."""
        if self.manifest is None:
            return {}
        import pyarrow.parquet as pq

        try:
            t = pq.read_table(self.out / f"{table}.parquet", columns=["id", "human_readable_id"])
        except (OSError, KeyError, ValueError) as exc:
            raise IndexerError(f"{self.out}: cannot read the previous {table} ({exc}); delete the folder to rebuild") from exc
        return {str(i): int(h) for i, h in zip(t.column("id").to_pylist(), t.column("human_readable_id").to_pylist(), strict=True)}

    def copy_extractions(
        self, writer: ExtractionWriter, current: set[str], reused: set[str], order: list[str],
        cache: dict[str, ChunkExtraction] | None,
    ) -> None:
        """Copy the previous build's extractions of chunks in `current` into `writer`, in their stored order: whole
        gzip members (compressed bytes, not re-encoded) where every chunk of one is kept, else line by line.
        Fills `reused`, `order` and (when given) `cache` with the decoded results."""
        old = self.out / STATE_DIR / EXTRACTIONS
        members = read_members(old, self.mode)
        if members is None:  # an older file without its member list
            for cid, line in iter_extraction_lines(old, self.mode):
                if cid in current and cid not in reused:
                    writer.write_line(line, cid)
                    self._reuse(cid, line, reused, order, cache)
            return
        for member in members:
            ids = member.chunk_ids
            if len(set(ids)) == len(ids) and all(cid in current and cid not in reused for cid in ids):
                writer.copy_member(member)  # an unchanged document: its bytes as they are
                for cid, line in zip(member.chunk_ids, member.lines, strict=True):
                    self._reuse(cid, line, reused, order, cache)
                continue
            for cid, line in zip(member.chunk_ids, member.lines, strict=True):
                if cid in current and cid not in reused:
                    writer.write_line(line, cid)
                    self._reuse(cid, line, reused, order, cache)
            writer.boundary()

    def _reuse(self, cid: str, line: str, reused: set[str], order: list[str], cache: dict[str, ChunkExtraction] | None) -> None:
        reused.add(cid)
        order.append(cid)
        if cache is not None:  # decoded once here, instead of reading the new file back
            try:
                cache[cid] = decode_extraction_line(line, ChunkExtraction)
            except CodecError as exc:
                raise IndexerError(f"{self.out / STATE_DIR / EXTRACTIONS}: {exc}; delete it to re-extract") from exc
