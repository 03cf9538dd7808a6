"""Indexer settings and the report every build returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from engines.models.base import Usage
from engines.models.config import format_validation_error

# Which offline extractor ran (recorded in the manifest as "offline:<this>"): rules with WordNet noun classes
# (indexer/data/noun_classes.txt), as no NER model with verifiable provenance installs from PyPI. Bumped
# whenever its output changes, so stored per-chunk results are not reused.
EXTRACTOR_VERSION = "rules-10"
FORMAT_VERSION = 1


class IndexerError(RuntimeError):
    """A build could not run (bad input folder, bad settings, unreadable previous state); `key` names the
    setting when a setting is at fault."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class IndexerConfig(BaseModel):
    """Settings of one build. Defaults follow GraphRAG's (1200/100 tokens, o200k_base, Leiden 10).

    A pydantic model like every graphroute setting: unknown keys and wrong types are refused, and a bad
    value raises `IndexerError` naming the key, e.g. ``indexer: chunk_size: must be >= 16 (got 8)``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    chunk_size: int = Field(default=1200, ge=16)
    chunk_overlap: int = Field(default=100, ge=0)
    encoding: str = "o200k_base"
    max_gleanings: int = Field(default=1, ge=0)
    claims: bool = False
    max_cluster_size: int = Field(default=10, ge=2)
    seed: int = 0xDEADBEEF
    embedding_dim: int = Field(default=256, ge=2)
    embed_batch_size: int = Field(default=256, ge=1)
    # offline extraction
    min_phrase_chunks: int = Field(default=3, ge=1)  # a lowercase noun phrase becomes an entity once seen in this many chunks
    max_phrase_entities: int = Field(default=2000, ge=0)
    max_entities_per_sentence: int = Field(default=12, ge=1)
    description_sentences: int = Field(default=3, ge=1)
    # model path
    summarize_min_tokens: int = Field(default=200, ge=1)  # merge an entity's descriptions with the model above this size
    report_max_input_tokens: int = Field(default=8000, ge=100)
    model_concurrency: int = Field(default=8, ge=1)
    entity_types: tuple[str, ...] = ("ORGANIZATION", "PERSON", "GEO", "EVENT")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            first = ".".join(str(p) for p in err.errors()[0]["loc"])
            raise IndexerError(format_validation_error(err, "indexer", ""), key=first) from None

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_fits(cls, value: int, info: ValidationInfo) -> int:
        size = info.data.get("chunk_size")
        if size is not None and value >= size:
            raise ValueError(f"chunk_overlap must be smaller than chunk_size ({size})")
        return value

    def chunking_settings(self) -> dict[str, Any]:
        """Settings that change text units; a change forces a full rebuild."""
        return {"chunk_size": self.chunk_size, "chunk_overlap": self.chunk_overlap, "encoding": self.encoding}

    def to_dict(self) -> dict[str, Any]:
        d = self.model_dump()
        d["entity_types"] = list(self.entity_types)
        return d


@dataclass
class IndexBuildReport:
    """What a build did: counts, seconds per step, model usage, and whether anything changed."""

    out_dir: str
    documents: int = 0
    chunks: int = 0
    new_chunks: int = 0
    removed_chunks: int = 0
    entities: int = 0
    relationships: int = 0
    communities: int = 0
    reports: int = 0
    claims: int = 0
    noop: bool = False
    full_rebuild_reason: str = ""
    message: str = ""
    extraction: str = "offline"
    embedder: str = ""
    skipped_files: list[str] = field(default_factory=list)
    encodings: dict[str, str] = field(default_factory=dict)  # input file -> how it was decoded
    warnings: list[str] = field(default_factory=list)
    step_seconds: dict[str, float] = field(default_factory=dict)
    step_cpu_seconds: dict[str, float] = field(default_factory=dict)  # CPU time of the process (all threads)
    step_peak_rss_mb: dict[str, float] = field(default_factory=dict)  # the process's peak RSS when each step ended
    embedded: dict[str, int] = field(default_factory=dict)  # texts embedded by this run, per vector table
    vectors_reused: int = 0  # vectors copied from the previous build (their text did not change)
    reports_reused: int = 0  # reports kept from the previous build (model: context unchanged; offline: same text)
    communities_reused: int = 0  # communities whose structure an update kept (their part of the graph did not change)
    boilerplate_units: int = 0  # text units mostly licence or front/back matter: kept, not extracted
    usage: Usage = field(default_factory=Usage)

    @property
    def total_seconds(self) -> float:
        return sum(self.step_seconds.values())

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "usage"}
        d["usage"] = self.usage.to_dict()
        d["total_seconds"] = self.total_seconds
        return d

    def summary(self) -> str:
        """Human-readable multi-line summary (what the CLI prints)."""
        if self.noop:
            return self.message
        lines = [
            self.message,
            f"documents {self.documents}, chunks {self.chunks} ({self.new_chunks} new, {self.removed_chunks} removed), "
            f"entities {self.entities}, relationships {self.relationships}, communities {self.communities}, "
            f"reports {self.reports}" + (f", claims {self.claims}" if self.claims else ""),
            (f"{self.boilerplate_units} chunks of licence or front/back matter kept but not extracted"
             if self.boilerplate_units else ""),
            f"vectors: {sum(self.embedded.values())} embedded, {self.vectors_reused} reused"
            + (f"; reports: {self.reports_reused} of {self.reports} reused" if self.reports_reused else "")
            + (f"; communities: {self.communities_reused} of {self.communities} kept" if self.communities_reused else ""),
            "seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in self.step_seconds.items())
            + f" (total {self.total_seconds:.2f})",
        ]
        total = self.usage.total
        if total.llm_calls or total.embedding_calls:
            lines.append(
                f"model usage: {total.llm_calls} calls ({total.cached_calls} cached), "
                f"{total.prompt_tokens} prompt + {total.output_tokens} output tokens, "
                f"{total.embedding_calls} embedding calls, ${total.cost:.4f}"
            )
        if self.encodings:
            lines.append("read: " + encodings_line(self.encodings))
        if self.skipped_files:
            lines.append("skipped: " + "; ".join(self.skipped_files))
        if self.warnings:
            lines.append(f"warnings ({len(self.warnings)}): " + "; ".join(self.warnings[:5]))
        return "\n".join(line for line in lines if line)


def encodings_line(encodings: dict[str, str]) -> str:
    """"utf-8 12 files; latin-1: a.txt; gb18030: b.txt, c.txt": common decodings counted, rare ones named."""
    by_kind: dict[str, list[str]] = {}
    for name, kind in sorted(encodings.items()):
        by_kind.setdefault(kind, []).append(name)
    parts = []
    for kind, names in sorted(by_kind.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(names) > 3:
            parts.append(f"{kind} {len(names)} files")
        else:
            parts.append(f"{kind}: {', '.join(names)}")
    return "; ".join(parts)
