"""The local context's entity tables: Entities, then the Relationships and Claims of the largest prefix of
them that fits (GraphRAG's rule), with GraphRAG's candidate context on request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shared_context.linking import LinkedEntity
from shared_context.local_budget import LocalContextParams
from shared_context.local_rows import (
    CLAIM_COLUMNS,
    cached_row,
    claim_line,
    claim_record,
    entity_cells,
    entity_columns,
    entity_record,
    entity_values,
    rel_columns,
    rel_line,
    rel_record,
)
from shared_context.relationship_selection import select_relationships
from shared_context.row_estimates import may_fit, row_estimates
from shared_context.tables import (
    ClaimRecord,
    EntityRecord,
    RelationshipRecord,
    Section,
    SectionBuilder,
    render_row,
)

__all__ = ["entity_tables"]


def entity_tables(
    index: Any, linked: Sequence[LinkedEntity], budget: int, p: LocalContextParams, entity_share: float = 1.0
) -> tuple[Section[EntityRecord], Section[RelationshipRecord], Section[ClaimRecord]]:
    """(Entities, Relationships, Claims) sharing `budget`. `entity_share` < 1 caps the Entities table at that
    share of `budget`, so a small budget (a fact question's, `local_budget.py`) still leaves room for the
    relationships and claims of the first entities."""
    tok = index.tokenizer
    ents: SectionBuilder[EntityRecord] = SectionBuilder("Entities", entity_columns(p), tok,
                                                        int(budget * entity_share))
    for e in linked:
        values = entity_values(index, e.position)
        line, n = cached_row(
            index,
            "entity",
            e.position,
            (p.include_entity_rank,),
            lambda e=e, values=values: entity_cells(index, e.position, p, values),
        )
        ents.add_line(line, n, entity_record(index, e.position, values))
    ent_section = ents.finish()
    in_table = [r.position for r in ent_section.rows]
    rel_cols = rel_columns(p)
    rel_head = tok.count("-----Relationships-----\n" + render_row([c.label for c in rel_cols]) + "\n")
    claim_head = tok.count("-----Claims-----\n" + render_row([c.label for c in CLAIM_COLUMNS]) + "\n")

    # GraphRAG's rule: add entities one by one and keep the largest prefix whose relationships and
    # claims fit together with the entity table (costs are estimates from load-time counts).
    remaining = budget - ent_section.tokens
    est = row_estimates(index)
    chosen: tuple[list[int], list[int]] = ([], [])
    for size in range(1, len(in_table) + 1):
        prefix = in_table[:size]
        in_rels, out_rels = select_relationships(index, prefix, p.top_k_relationships,
                                                 p.relationship_ranking_attribute)
        rels = in_rels + out_rels
        claims = [c for e in prefix for c in index.entity_claims[e]]
        cost = (rel_head + int(est.rel[rels].sum()) if rels else 0) + (
            claim_head + int(est.claim[claims].sum()) if claims else 0
        )
        if cost > remaining:
            if size == 1:  # not even the first entity's rows fit: take what fits of them, in order
                chosen = (rels, claims)
            break
        chosen = (rels, claims)
    rel_builder: SectionBuilder[RelationshipRecord] = SectionBuilder("Relationships", rel_cols, tok, remaining)
    for r in chosen[0]:
        if may_fit(rel_builder, int(est.rel[r])):
            record = rel_record(index, r)
            rel_builder.add_line(*rel_line(index, r, p, record), record)
    rel_section = rel_builder.finish()
    claim_builder: SectionBuilder[ClaimRecord] = SectionBuilder("Claims", CLAIM_COLUMNS, tok,
                                                                remaining - rel_section.tokens)
    for c in chosen[1]:
        if may_fit(claim_builder, int(est.claim[c])):
            claim_builder.add_line(*claim_line(index, c), claim_record(index, c))
    claim_section = claim_builder.finish()

    if p.return_candidate_context:
        _add_candidates(index, linked, ent_section, rel_section, claim_section)
    return ent_section, rel_section, claim_section


def _add_candidates(
    index: Any,
    linked: Sequence[LinkedEntity],
    ent_section: Section[EntityRecord],
    rel_section: Section[RelationshipRecord],
    claim_section: Section[ClaimRecord],
) -> None:
    """GraphRAG's candidate context: every relationship and claim of the selected entities and every
    entity at the end of those relationships, marked in_context=False when not shown."""
    selected = [e.position for e in linked]
    shown_rels = {r.position for r in rel_section.rows}
    cand_rels = sorted({r for e in selected for r in index.entity_relationships[e]} - shown_rels)
    rel_section.candidates.extend(rel_record(index, r) for r in cand_rels)
    shown_entities = {r.position for r in ent_section.rows}
    cand_entities = [e for e in selected if e not in shown_entities]
    ends = index.relationship_endpoints[cand_rels] if cand_rels else np.zeros((0, 2), dtype=np.int64)
    others = sorted(set(ends.ravel().tolist()) - shown_entities - set(cand_entities) - {-1})
    ent_section.candidates.extend(entity_record(index, e) for e in [*cand_entities, *others])
    shown_claims = {r.position for r in claim_section.rows}
    claim_section.candidates.extend(
        claim_record(index, c)
        for e in selected
        for c in index.entity_claims[e]
        if c not in shown_claims
    )
