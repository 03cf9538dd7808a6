"""The local context's parameters and its budget flow: how `max_context_tokens` is shared between sections.

Budget flow (documented contract): the history table takes at most `conversation_history_prop` of
`max_context_tokens` first; a few tokens are reserved for the blank lines joining sections; the rest
(M) is split like GraphRAG (reports = M·community_prop, local = M·(1 − community_prop − text_unit_prop),
sources = M·text_unit_prop), but what a section leaves unused flows on to the next one:
reports → local (entities + relationships + claims) → sources. The whole text never exceeds
`max_context_tokens` and each section never exceeds its (possibly enlarged) budget. Sources never get more
than 1 − community_prop: a default text_unit_prop yields to a larger community_prop set by the user (by
default community_prop is 0: no reports, see `LocalContextParams`).

Shares that follow the linking (`weak_link_text_unit_prop`, off when None): the question's linking
strength s = min(1, entities matched by name / `strong_link_exact_matches`) (`link_strength`). The Sources
share becomes weak_link_text_unit_prop + s·(text_unit_prop − weak_link_text_unit_prop): when no entity is
named (s = 0) the entity tables are guesses and Sources get the weak-link share; when the question names
its entities (s = 1) the entity tables get GraphRAG's share back. The entity tables take what is left.

Shares that follow what the question asks (`fact_text_unit_prop`, off when None; `question_need`): a question
that names at least two entities and asks how they relate (a word of `data/relation_cues.txt`) needs the
graph's rows, so it keeps the share above; any other question asks for facts the source text states, and its
Sources share is at least `fact_text_unit_prop`, but never so much that the entity tables keep less than
`min_graph_prop` (the floor is capped at 1 − community_prop − min_graph_prop): every context keeps some entity
and relationship rows, which answers, citations and the graph view rely on. A fact question's Reports budget is
M·min(community_prop, `fact_community_prop`) when that is set; the entity tables' budget is still reckoned
from community_prop, so the room the smaller Reports share frees flows to Sources.

A setting the user wrote is honoured for every question: each refinement above (`REFINEMENTS`) is off while the
GraphRAG setting it refines was set and the refinement itself was not (`LocalContextParams.refinement`), so
`community_prop: 0.2` in settings.yaml shows reports for "Who is ...?" as for a relation question.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared_context.history import HISTORY_SECTION
from shared_context.linking import LinkResult
from shared_context.text import TOKEN_RE, word_list
from shared_context.text_unit_selection import (
    DEFAULT_LINKED_UNIT_ORDER,
    DEFAULT_TEXT_UNIT_STRATEGY,
    LinkedUnitOrder,
    TextUnitStrategy,
)
from shared_context.tokens import Tokenizer

__all__ = [
    "REFINEMENTS",
    "SECTION_ORDER",
    "LocalContextParams",
    "QuestionNeed",
    "entity_tables_budget",
    "fact_floor_applies",
    "link_strength",
    "question_need",
    "reports_budget",
    "section_room",
]

QuestionNeed = Literal["fact", "relation"]
# graphroute's refinement -> the GraphRAG setting it overrides for some questions (module docstring)
REFINEMENTS = {"weak_link_text_unit_prop": "text_unit_prop", "fact_text_unit_prop": "text_unit_prop",
               "fact_community_prop": "community_prop"}
_RELATION_CUES = word_list("relation_cues.txt")

SECTION_ORDER = (HISTORY_SECTION, "Reports", "Entities", "Relationships", "Claims", "Sources")


class LocalContextParams(BaseModel):
    """GraphRAG's local-search context parameters (names, and its defaults except `text_unit_prop`),
    plus strategy and share knobs."""

    # defer_build: validators are built on first use, not when `import router` defines the class (import time)
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_context_tokens: int = Field(default=12_000, ge=0)
    # GraphRAG gives Sources 0.5 and community reports 0.15. Here Sources get 0.8 and reports none by default:
    # on the GraphRAG-Bench novel and medical dev questions the reports of a local context added no evidence
    # (evidence word recall rose without them) while their budget, given to Sources, reached more evidence
    # spans on the novel questions and as many on the medical ones; the entity tables keep 0.2, which still holds the question's entities, their relationships and
    # the rows between the entities it names (benchmarks/evidence_recall.py, docs/benchmarks.md). Set
    # community_prop (GraphRAG's name) to show reports; a default text_unit_prop yields to it.
    text_unit_prop: float = Field(default=0.8, ge=0.0, le=1.0)
    community_prop: float = Field(default=0.0, ge=0.0, le=1.0)
    top_k_mapped_entities: int = Field(default=10, ge=0)
    top_k_relationships: int = Field(default=10, ge=0)
    conversation_history_max_turns: int = Field(default=5, ge=0)
    # the history table shows the user's turns only
    conversation_history_user_turns_only: bool = True
    # graphroute extension: cap on the history table's share of max_context_tokens (GraphRAG has none).
    conversation_history_prop: float = Field(default=0.25, ge=0.0, le=1.0)
    # show each entity's rank (its number of relationships)
    include_entity_rank: bool = True
    # the column name the Entities table gives an entity's rank
    rank_description: str = "number of relationships"
    # show each relationship's weight
    include_relationship_weight: bool = True
    relationship_ranking_attribute: Literal["rank", "weight"] = Field(
        default="rank", description="how relationships are ranked in the local context, as in GraphRAG: 'rank' "
        "(combined degree, then weight) or 'weight' (weight, then combined degree); out-network relationships "
        "are ranked by how many selected entities they link first")
    # show each community report's rank
    include_community_rank: bool = False
    # show a community report's summary instead of its full content
    use_community_summary: bool = False
    # leave out community reports ranked below this
    min_community_rank: float = 0
    # also return the candidate records that did not fit (for inspection)
    return_candidate_context: bool = False
    # how Sources are chosen: hybrid (entity links fused with the question's BM25 and vector rankings, shown
    # as excerpts) or GraphRAG's own order and variants
    text_unit_strategy: TextUnitStrategy = DEFAULT_TEXT_UNIT_STRATEGY
    per_entity_cap: int = Field(default=3, ge=1)
    min_units_per_entity: int = Field(default=1, ge=0)
    # hybrid strategy: weight of the question rankings against the entity-linked order, and the RRF
    # constant (see text_unit_selection.py for the formula)
    hybrid_question_weight: float = Field(default=1.0, ge=0.0)
    hybrid_rrf_k: int = Field(default=60, ge=0)
    # hybrid strategy: how the linked entities' units are ordered before the fusion: "question" puts those the
    # question's lexical ranking also holds first (in its order), "coverage" keeps the order by how many of the
    # linked entities a unit mentions (text_unit_selection.py)
    hybrid_linked_order: LinkedUnitOrder = DEFAULT_LINKED_UNIT_ORDER
    # hybrid strategy, excerpt mode (shared_context/passages.py): Sources show the question-relevant
    # windows (about this many tokens) of many units instead of a few whole units; 0 = whole units.
    # 200 reached the most evidence among 150/200/300/400 on the tuning half of the GraphRAG-Bench dev
    # questions (benchmarks/evidence_recall.py, README).
    excerpt_tokens: int = Field(default=200, ge=0)
    # weight of the unit-rank prior against a window's own relevance (passages.py formula)
    excerpt_weight: float = Field(default=1.0, ge=0.0)
    # Section shares that follow linking strength (module docstring): the Sources share used when no
    # linked entity matched by name; None keeps text_unit_prop whatever the linking.
    weak_link_text_unit_prop: float | None = Field(default=0.8, ge=0.0, le=1.0)
    strong_link_exact_matches: int = Field(default=1, ge=1)
    # Section shares that follow what the question asks (module docstring): the least Sources share of a fact
    # question (one not asking how named entities relate); None keeps the shares above for every question.
    # 0.8 reached more evidence than the fixed split on the tuning half of the GraphRAG-Bench novel and medical
    # dev questions (benchmarks/evidence_recall.py --half tune, docs/benchmarks.md) when reports had 0.1 of the
    # budget; with no reports by default, 0.9 gives a fact question the same Sources as then. The floor never
    # leaves the entity tables less than min_graph_prop. 0 (or None) turns the floor off.
    fact_text_unit_prop: float | None = Field(default=0.9, ge=0.0, le=1.0)
    # the least share the entity tables (entities, relationships, claims) keep when the fact floor applies
    min_graph_prop: float = Field(default=0.1, ge=0.0, le=1.0)
    # the Entities table's most share of the entity tables when the fact floor applies; the rest keeps the
    # first entities' relationships and claims
    fact_entity_share: float = Field(default=0.6, gt=0.0, le=1.0)
    # the Reports share of a fact question; the room it frees goes to Sources (the entity tables keep their
    # share). 0 (the default: no reports for a fact question) reached more evidence than 0.03 and than
    # community_prop on both halves of the GraphRAG-Bench novel and medical dev questions
    # (benchmarks/evidence_recall.py --set fact_community_prop=...); a relation question keeps its reports.
    # None keeps community_prop for every question, so every context shows its community reports.
    fact_community_prop: float | None = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _props_fit(self) -> LocalContextParams:
        # the Sources shares are checked only when set: their defaults yield to a larger community_prop
        names = [n for n in ("text_unit_prop", "weak_link_text_unit_prop") if n in self.model_fields_set]
        for name in names:
            value = getattr(self, name)
            if value is not None and self.community_prop + value > 1:
                raise ValueError(
                    f"community_prop ({self.community_prop}) + {name} ({value}) must not "
                    "exceed 1: together they are shares of the same context budget"
                )
        return self

    def refinement(self, name: str) -> float | None:
        """The refinement `name` (a key of `REFINEMENTS`) in effect: None (off) while the GraphRAG setting it
        refines was set and it was not, so the value the user wrote applies to every question."""
        if name not in self.model_fields_set and REFINEMENTS[name] in self.model_fields_set:
            return None
        value: float | None = getattr(self, name)
        return value

    def sources_share(self, link_strength: float, need: QuestionNeed = "relation") -> float:
        """text_unit_prop after the linking-strength and question-need rules (module docstring)."""
        share = strong = min(self.text_unit_prop, 1.0 - self.community_prop)
        weak_prop = self.refinement("weak_link_text_unit_prop")
        if weak_prop is not None:
            s = min(max(link_strength, 0.0), 1.0)
            weak = min(weak_prop, 1.0 - self.community_prop)
            share = weak + s * (strong - weak)
        fact_prop = self.refinement("fact_text_unit_prop")
        if need == "fact" and fact_prop is not None:
            cap = max(1.0 - self.community_prop - self.min_graph_prop, 0.0)
            share = max(share, min(fact_prop, cap))
        return share


def fact_floor_applies(p: LocalContextParams, strength: float, need: QuestionNeed) -> bool:
    """Whether the fact floor raised the Sources share above the linking rule's (module docstring)."""
    return need == "fact" and p.sources_share(strength, need) > p.sources_share(strength, "relation")


def link_strength(link: LinkResult, strong_matches: int) -> float:
    """How firmly the question names its entities: linked entities matched by name (title, alias or
    forced by include) over `strong_matches`, capped at 1. 0 means the entities were only guessed from
    words or vectors, so the entity tables are weak evidence and the Sources share grows."""
    named = sum(1 for e in link.entities if e.exact)
    return min(named / max(strong_matches, 1), 1.0)


def question_need(link: LinkResult) -> QuestionNeed:
    """"relation" when the question names at least two linked entities and uses a relation word
    (`data/relation_cues.txt`), else "fact" (module docstring)."""
    named = sum(1 for e in link.entities if e.exact)
    words = {w.lower() for w in TOKEN_RE.findall(link.query_text)}
    return "relation" if named >= 2 and not words.isdisjoint(_RELATION_CUES) else "fact"


def section_room(tokenizer: Tokenizer, total: int) -> int:
    """M: what is left of `total` (the budget after the history table) once the blank lines joining the
    sections are reserved."""
    separators = tokenizer.count("\n\n") * (len(SECTION_ORDER) - 1)
    return max(total - separators, 0)


def reports_budget(room: int, p: LocalContextParams, need: QuestionNeed = "relation") -> int:
    """The Reports section's budget: M·community_prop, or M·min(community_prop, fact_community_prop) for a
    fact question (what that frees flows on to Sources)."""
    prop = p.community_prop
    fact_prop = p.refinement("fact_community_prop")
    if need == "fact" and fact_prop is not None:
        prop = min(prop, fact_prop)
    return max(int(room * prop), 0)


def entity_tables_budget(
    room: int, p: LocalContextParams, strength: float, reports_left: int, need: QuestionNeed = "relation"
) -> int:
    """The entity tables' budget: M·(1 − community_prop − Sources share), plus what the reports left."""
    return max(int(room * (1 - p.community_prop - p.sources_share(strength, need))), 0) + reports_left
