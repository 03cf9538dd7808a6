"""How specific a question is *in this index*: the signals that decide what the wording cannot.

The same words can ask about one thing or about everything, depending on the collection: "What do people say
about pricing?" is a look-up in an index where pricing is one entity of one community, and a corpus-wide
question in a collection of forty earnings calls where pricing comes up everywhere. Three measurements, all
cheap once per index (BM25 tables and per-index lookups are cached beside the index):

* **specific links**: entities the question names by title (`router.features.signals_from_link`) that are not
  everywhere in the collection. An entity mentioned in most documents (the podcast's host, the company's CEO)
  is a *speaker of the collection*: naming it does not narrow the question to one place;
* **spread**: how the question's content words spread over the top-level community reports - the effective
  number of top-level communities their BM25 mass falls on (exp of its entropy), as a share of all of them.
  A thin spread over many communities, with nothing specific named, is what a corpus-wide question looks like;
* **named documents**: whether the question names one document of the collection (an episode number, a
  quarter, a file's distinctive title words), which makes it a question about that document.

`situations` turns a measurement into indicators of the situations in `SITUATIONS`; `adjust` turns those into
log-odds nudges on the classifier's probabilities and user-facing reasons. The nudges per situation and route
are fitted by `tools.routing.scope_fit` on questions measured against real indexes (stored in the model file);
`DEFAULT_WEIGHTS` are the hand-set values a model file without fitted weights falls back to.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from router.features import IndexSignals
from shared_context.text import LazyPattern

CLASSES = ("local", "global", "drift")
# The situations `adjust` recognises, one 0/1 indicator each (`situations`). Their log-odds nudges per class are
# fitted by `tools.routing.scope_fit` on questions measured against real indexes and stored in the model file; the
# values below are the hand-set starting point, used only by a model file that carries no fitted weights.
SITUATIONS = ("one_document", "several_documents", "one_specific_entity", "several_specific_entities", "thin_spread",
              "speakers_only")
DEFAULT_WEIGHTS = np.array([  # rows: SITUATIONS; columns: CLASSES (local, global, drift)
    [1.2, -1.2, 0.0],  # one named document -> local
    [-0.3, -0.6, 0.8],  # several named documents -> DRIFT
    [0.3, -1.0, 0.2],  # one specific entity named -> away from global
    [-0.2, -1.0, 0.6],  # several specific entities -> away from global, towards DRIFT
    [-0.8, 1.2, -0.4],  # nothing specific, words spread thinly over the top level -> global
    [0.0, 0.0, 0.0],  # only speakers of the whole collection named (no prior: the wording decides)
])
SPREAD_THRESHOLD = 0.3  # effective share of top-level communities the question's words touch
UBIQUITOUS_SHARE = 0.5  # an entity in at least this share of documents is a speaker of the collection
MAX_NAMED_DOCUMENTS = 3  # more matches than this is a family of documents ("the FY15 calls"), not a name
MIN_DOCUMENTS_FOR_UBIQUITY = 3  # with one or two documents every entity is "everywhere": not a signal

_TITLE_SPLIT = LazyPattern(r"[A-Za-z]+|\d+|[\u4e00-\u9fff]")
_CAMEL = LazyPattern(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_CJK_COUNTED = LazyPattern(r"第\s*(\d+)|(?<!\d)(\d+)\s*(?=[期集章讲号场季])")
_FILE_SUFFIX = LazyPattern(r"\.(?:txt|md|pdf|docx?|html?|json|csv)$", re.IGNORECASE)


@dataclass(frozen=True)
class IndexScope:
    specific: tuple[str, ...] = ()  # linked entities that are not everywhere in the collection
    speakers: tuple[str, ...] = ()  # linked entities found in most documents
    documents: tuple[str, ...] = ()  # documents the question names
    touched: int = 0  # top-level communities whose reports share a content word with the question
    top_level: int = 0  # top-level communities in the index
    spread: float = 0.0  # effective share of top-level communities touched (0..1)

    def as_dict(self) -> dict[str, float]:
        return {"specific_entities": float(len(self.specific)), "collection_speakers": float(len(self.speakers)),
                "named_documents": float(len(self.documents)), "top_level_touched": float(self.touched),
                "top_level_communities": float(self.top_level), "top_level_spread": round(self.spread, 3)}


def _title_tokens(title: str) -> list[str]:
    title = _FILE_SUFFIX.sub("", title)
    return [t.lower() for part in _CAMEL.sub(" ", title).split() for t in _TITLE_SPLIT.findall(part)]


def _key_pairs(tokens: Sequence[str]) -> set[tuple[str, str]]:
    """Adjacent token pairs that hold a number ("episode 29", "fy 14", "q 4"): how documents are named."""
    return {(a, b) for a, b in itertools.pairwise(tokens) if a.isdigit() or b.isdigit()}


def _numbers(tokens: Sequence[str]) -> frozenset[str]:
    return frozenset(t.lstrip("0") or "0" for t in tokens if t.isdigit())


@dataclass(frozen=True)
class _Tables:
    doc_pairs: list[set[tuple[str, str]]]
    doc_numbers: list[frozenset[str]]
    doc_titles: list[str]
    entity_doc_share: np.ndarray  # per entity: share of the collection's documents it appears in
    n_documents: int
    top_reports: np.ndarray  # report positions at the top level
    report_top: dict[int, int]  # report position -> its position among top-level reports


def _build_tables(index: Any) -> _Tables:
    documents = list(getattr(index, "documents", []) or [])
    titles = [str(getattr(d, "title", "") or "") for d in documents]
    tokens = [_title_tokens(t) for t in titles]
    doc_pairs = [_key_pairs(t) for t in tokens]
    doc_numbers = [_numbers(t) for t in tokens]
    unit_doc = list(getattr(index, "text_unit_document", []) or [])
    shares = np.zeros(len(index.entities), dtype=np.float64)
    if documents:
        for pos, units in enumerate(getattr(index, "entity_text_units", []) or []):
            docs = {unit_doc[u] for u in units if 0 <= u < len(unit_doc) and unit_doc[u] >= 0}
            shares[pos] = len(docs) / len(documents)
    levels = getattr(index, "reports_by_level", {}) or {}
    top = np.asarray(levels[min(levels)], dtype=np.int64) if levels else np.zeros(0, dtype=np.int64)
    return _Tables(doc_pairs, doc_numbers, titles, shares, len(documents), top, {int(r): i for i, r in enumerate(top)})


def _tables(index: Any) -> _Tables:
    from shared_context.tables import per_index_cache

    return per_index_cache(index, "router.index_scope", lambda: _build_tables(index))


def _named_documents(tables: _Tables, text: str) -> tuple[str, ...]:
    """Documents whose every title number is in the question, with at least one title pair ("episode 29",
    "fy 15") as written: "FY14 Q4" names TranscriptFY14Q4, "episode 29" names Episode_29_...; "FY15" alone
    names no quarter. Only a few matches count: naming a whole family of documents is not naming one."""
    question = _title_tokens(text)
    pairs, numbers = _key_pairs(question), _numbers(question)
    if not pairs:
        return ()
    counted = frozenset((m.group(1) or m.group(2)).lstrip("0") or "0"  # "第30期": numbered the Chinese way
                        for m in _CJK_COUNTED.finditer(text))
    named = [_FILE_SUFFIX.sub("", tables.doc_titles[i]) for i, (dp, dn) in
             enumerate(zip(tables.doc_pairs, tables.doc_numbers, strict=True))
             if dn and dn <= numbers and (dp & pairs or dn & counted)]
    return tuple(named) if len(named) <= MAX_NAMED_DOCUMENTS else ()


def _spread(index: Any, tables: _Tables, text: str) -> tuple[int, float]:
    if len(tables.top_reports) == 0:
        return 0, 0.0
    from shared_context.linking import lexical_scores

    scores = np.asarray(lexical_scores(index, "reports", text), dtype=np.float64)[tables.top_reports]
    touched = int(np.count_nonzero(scores > 0))
    total = float(scores.sum())
    if total <= 0:
        return 0, 0.0
    p = scores[scores > 0] / total
    effective = math.exp(float(-(p * np.log(p)).sum()))
    return touched, effective / len(tables.top_reports)


def measure(index: Any, text: str, signals: IndexSignals | None, linked_positions: Sequence[int] = ()) -> IndexScope:
    """All three measurements for one question (`linked_positions` align with `signals.names`)."""
    tables = _tables(index)
    specific: list[str] = []
    speakers: list[str] = []
    names = signals.names if signals is not None else ()
    ubiquity_counts = tables.n_documents >= MIN_DOCUMENTS_FOR_UBIQUITY
    for name, pos in zip(names, linked_positions, strict=False):
        if ubiquity_counts and 0 <= pos < len(tables.entity_doc_share) and \
                tables.entity_doc_share[pos] >= UBIQUITOUS_SHARE:
            speakers.append(name)
        else:
            specific.append(name)
    touched, spread = _spread(index, tables, text)
    return IndexScope(tuple(specific), tuple(speakers), _named_documents(tables, text), touched,
                      len(tables.top_reports), spread)


def _shown(names: Sequence[str], limit: int = 2) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def situations(scope: IndexScope) -> np.ndarray:
    """The `SITUATIONS` indicators of one measurement (0/1 each)."""
    thin = not scope.specific and not scope.documents and scope.spread >= SPREAD_THRESHOLD
    return np.array([len(scope.documents) == 1, len(scope.documents) >= 2, len(scope.specific) == 1,
                     len(scope.specific) >= 2, thin,
                     bool(scope.speakers) and not scope.specific and not scope.documents and not thin], dtype=float)


def adjust(scope: IndexScope, weights: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
    """Log-odds nudges in `CLASSES` order (`situations(scope) @ weights`), and the reasons to show for them.

    * one named document -> a question about that episode / call / filing; several -> across them;
    * one specific entity named (not a speaker of the whole collection), or several;
    * nothing specific named and the words spread thinly over many top-level communities;
    * only speakers of the whole collection named.
    """
    found = situations(scope)
    bonus = found @ (DEFAULT_WEIGHTS if weights is None else weights)
    reasons: list[str] = []
    if len(scope.documents) == 1:
        reasons.append(f"names one document of the collection ({scope.documents[0]})")
    elif len(scope.documents) >= 2:
        reasons.append(f"names {len(scope.documents)} documents of the collection ({_shown(scope.documents)})")
    if scope.specific and not scope.documents:
        reasons.append(f"names something specific in this index ({_shown(scope.specific)})")
    elif found[SITUATIONS.index("thin_spread")]:
        who = f"; {_shown(scope.speakers)} appear(s) across the collection" if scope.speakers else ""
        reasons.append(f"names nothing specific in this index and its words spread over {scope.touched} of "
                       f"{scope.top_level} top-level communities{who}")
    elif found[SITUATIONS.index("speakers_only")]:
        reasons.append(f"{_shown(scope.speakers)} appear(s) across most of the collection, so naming them does "
                       "not narrow the question")
    return bonus, reasons
