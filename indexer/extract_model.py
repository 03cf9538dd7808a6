"""Model-based extraction: entities and relationships with gleaning rounds, optional claims, and
description summaries, all through the model layer (so its call cache makes re-runs free).

Per-chunk results are plain dicts (stored between runs by `state.py`); a chunk whose extraction failed
is not stored, so the next run retries it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from engines.models.base import ChatModel, Message, Usage
from engines.models.errors import ModelError, StructuredOutputError
from engines.models.structured import complete_json
from indexer import prompts
from indexer.config import IndexerConfig, IndexerError
from indexer.extract_offline import normalise_title
from indexer.graph import EntityRow, RelationshipRow
from shared_context.tokens import get_tokenizer

_CLAIM_NS = uuid.UUID("a3c9e1d2-7b4f-4e8a-9c61-5d2f8e0b4a17")


class ExtractedEntity(BaseModel):
    name: str
    type: str = ""
    description: str = ""


class ExtractedRelationship(BaseModel):
    source: str
    target: str
    description: str = ""
    strength: float = 1.0


class GraphExtraction(BaseModel):
    entities: list[ExtractedEntity] = Field(default_factory=list)
    relationships: list[ExtractedRelationship] = Field(default_factory=list)


class ExtractedClaim(BaseModel):
    subject: str
    object: str | None = "NONE"
    type: str = "CLAIM"
    status: str = "SUSPECTED"
    start_date: str | None = None
    end_date: str | None = None
    description: str = ""
    source_text: str = ""


class ClaimExtraction(BaseModel):
    claims: list[ExtractedClaim] = Field(default_factory=list)


@dataclass
class ModelChunkResult:
    entities: list[dict[str, str]] = field(default_factory=list)
    relationships: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)


class ModelExtractor:
    def __init__(self, model: ChatModel, config: IndexerConfig, usage: Usage) -> None:
        self.model = model
        self.config = config
        self.usage = usage
        self.warnings: list[str] = []
        self._sem = asyncio.Semaphore(config.model_concurrency)

    async def _json(self, stage: str, messages: list[Message], schema: type[BaseModel], task: str) -> Any:
        try:
            parsed, completions = await complete_json(self.model, messages, schema, task=task, temperature=0.0)
        except StructuredOutputError as exc:
            for c in exc.completions:
                self.usage.add_completion(stage, c)
            raise
        for c in completions:
            self.usage.add_completion(stage, c)
        return parsed

    async def extract_chunk(self, text: str) -> ModelChunkResult:
        types = ", ".join(self.config.entity_types)
        messages: list[Message] = [
            {"role": "system", "content": prompts.EXTRACT_SYSTEM.format(entity_types=types)},
            {"role": "user", "content": prompts.EXTRACT_USER.format(entity_types=types, text=text)},
        ]
        async with self._sem:
            first: GraphExtraction = await self._json("extract", messages, GraphExtraction, "extract_graph")
            result = ModelChunkResult()
            self._add(result, first)
            history: list[Message] = [*messages, {"role": "assistant", "content": first.model_dump_json()}]
            for round_no in range(self.config.max_gleanings):
                glean_msgs: list[Message] = [*history, {"role": "user", "content": prompts.GLEAN_USER}]
                more: GraphExtraction = await self._json("glean", glean_msgs, GraphExtraction, "extract_graph")
                self._add(result, more)
                history = [*glean_msgs, {"role": "assistant", "content": more.model_dump_json()}]
                if round_no >= self.config.max_gleanings - 1 or not (more.entities or more.relationships):
                    break
                check = await self.model.complete(
                    [*history, {"role": "user", "content": prompts.LOOP_USER}], task="extract_graph", max_tokens=1,
                    temperature=0.0,
                )
                self.usage.add_completion("glean", check)
                if not check.text.strip().upper().startswith("Y"):
                    break
            if self.config.claims:
                names = ", ".join(sorted({e["name"] for e in result.entities})) or "any"
                claim_msgs: list[Message] = [
                    {"role": "system", "content": prompts.CLAIMS_SYSTEM},
                    {"role": "user", "content": prompts.CLAIMS_USER.format(entities=names, text=text)},
                ]
                claims: ClaimExtraction = await self._json("claims", claim_msgs, ClaimExtraction, "extract_claims")
                result.claims = [c.model_dump() for c in claims.claims if c.subject.strip()]
        return result

    @staticmethod
    def _add(result: ModelChunkResult, extraction: GraphExtraction) -> None:
        for e in extraction.entities:
            name = normalise_title(e.name)
            if name:
                result.entities.append({"name": name, "type": e.type.strip().upper(), "description": e.description.strip()})
        for r in extraction.relationships:
            s, t = normalise_title(r.source), normalise_title(r.target)
            if s and t and s != t:
                strength = r.strength if r.strength > 0 else 1.0
                result.relationships.append({"source": s, "target": t, "description": r.description.strip(), "strength": float(strength)})

    async def extract_many(self, texts: list[str], on_done: Callable[[], Any] | None = None) -> list[ModelChunkResult | None]:
        async def one(text: str) -> ModelChunkResult | None:
            try:
                return await self.extract_chunk(text)
            except ModelError as exc:
                self.warnings.append(f"extraction failed for a chunk ({text[:40]!r}…): {exc}")
                return None
            finally:
                if on_done is not None:
                    on_done()

        results = await asyncio.gather(*(one(t) for t in texts))
        if texts and all(r is None for r in results):
            raise IndexerError(f"model extraction failed for every chunk; first error: {self.warnings[0]}")
        return list(results)

    async def summarize(self, name: str, descriptions: list[str]) -> str:
        """One description from several; joined as-is while they stay short (no call needed)."""
        unique = list(dict.fromkeys(d for d in descriptions if d))
        joined = " ".join(unique)
        if len(unique) <= 1 or get_tokenizer(self.config.encoding).count(joined) <= self.config.summarize_min_tokens:
            return joined
        messages: list[Message] = [
            {"role": "system", "content": prompts.SUMMARIZE_SYSTEM.format(max_words=max(60, self.config.summarize_min_tokens // 2))},
            {"role": "user", "content": prompts.SUMMARIZE_USER.format(name=name, descriptions="\n".join(f"- {d}" for d in sorted(unique)))},
        ]
        try:
            async with self._sem:
                completion = await self.model.complete(messages, task="summarize_descriptions", temperature=0.0)
        except ModelError as exc:
            self.warnings.append(f"description summary failed for {name}: {exc}; kept the joined descriptions")
            return joined
        self.usage.add_completion("summarize", completion)
        return completion.text.strip() or joined


async def merge_model_results(
    chunk_ids: list[str], extractions: dict[str, Any], extractor: ModelExtractor, on_progress: Any = None
) -> tuple[list[EntityRow], list[RelationshipRow], list[dict[str, Any]]]:
    """Merge per-chunk model results by normalised title; summarise long descriptions; build claim rows."""
    ent_types: dict[str, Counter[str]] = {}
    ent_descs: dict[str, list[str]] = {}
    ent_units: dict[str, list[str]] = {}
    rel_weight: dict[tuple[str, str], float] = {}
    rel_descs: dict[tuple[str, str], list[str]] = {}
    rel_units: dict[tuple[str, str], list[str]] = {}
    claims: list[dict[str, Any]] = []
    for cid in chunk_ids:
        res: ModelChunkResult | None = extractions.get(cid)
        if res is None:
            continue
        for e in res.entities:
            name = e["name"]
            ent_types.setdefault(name, Counter())[e["type"] or "CONCEPT"] += 1
            ent_descs.setdefault(name, []).append(e["description"])
            units = ent_units.setdefault(name, [])
            if not units or units[-1] != cid:
                units.append(cid)
        for r in res.relationships:
            key = (r["source"], r["target"]) if r["source"] < r["target"] else (r["target"], r["source"])
            rel_weight[key] = rel_weight.get(key, 0.0) + r["strength"]
            rel_descs.setdefault(key, []).append(r["description"])
            units = rel_units.setdefault(key, [])
            if not units or units[-1] != cid:
                units.append(cid)
        for c in res.claims:
            subject = normalise_title(c["subject"])
            obj = normalise_title(c.get("object") or "NONE") or "NONE"
            claims.append(
                {
                    "id": str(uuid.uuid5(_CLAIM_NS, f"{cid}\x1f{subject}\x1f{c.get('type')}\x1f{c.get('description')}")),
                    "human_readable_id": len(claims),
                    "covariate_type": "claim",
                    "type": (c.get("type") or "CLAIM").upper(),
                    "description": c.get("description") or "",
                    "subject_id": subject,
                    "object_id": obj,
                    "status": (c.get("status") or "SUSPECTED").upper(),
                    "start_date": c.get("start_date"),
                    "end_date": c.get("end_date"),
                    "source_text": c.get("source_text") or "",
                    "text_unit_id": cid,
                }
            )
    names = list(ent_descs)
    pairs = list(rel_descs)
    if on_progress is not None:
        on_progress.total = len(names) + len(pairs)
        on_progress.refresh()

    async def summarize(name: str, descs: list[str]) -> str:
        out = await extractor.summarize(name, descs)
        if on_progress is not None:
            on_progress.update(1)
        return out

    summaries = await asyncio.gather(
        *(summarize(n, ent_descs[n]) for n in names),
        *(summarize(f"{a} -> {b}", rel_descs[(a, b)]) for a, b in pairs),
    )
    entities = [
        EntityRow(
            title=n,
            type=ent_types[n].most_common(1)[0][0],
            description=summaries[i],
            text_unit_ids=ent_units[n],
            frequency=len(ent_units[n]),
        )
        for i, n in enumerate(names)
    ]
    relationships = [
        RelationshipRow(
            source=a,
            target=b,
            description=summaries[len(names) + i],
            weight=rel_weight[(a, b)],
            text_unit_ids=rel_units[(a, b)],
        )
        for i, (a, b) in enumerate(pairs)
    ]
    return entities, relationships, claims
