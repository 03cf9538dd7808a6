"""Entity linking: question (+ newest user turns) -> ranked entities with one merged score.

Signals
- exact: an entity title (or an alias: the title without a leading article / honorific such as "THE",
  "MR.") occurs in the query as a whole-word phrase, compared case-insensitively on normalised tokens
  (possessives and plurals reduced, so "Scrooge's" and "the Cratchits" match SCROOGE / CRATCHIT).
  CJK text has no word boundaries, so CJK titles match as character substrings.
- lexical: BM25 over titles (boosted x2) and descriptions. Words are lower-cased and lightly stemmed;
  CJK runs become character bigrams, so Chinese works without a segmenter.
- semantic: cosine with the stored `entity_description` vectors, only when a query vector of the same
  dimension is given (the engine embeds the query with the embedder the index was built with).

The BM25 matrices are built once per index content as sparse CSC postings, stored on disk and
memory-mapped on the next open (`lexical_store`; the first query of a large index no longer tokenises
every record), and kept beside the Index (`tables.per_index_cache`); a query touches only the posting
lists of its own terms. Above `SearchParams.lexical_on_disk_min_rows` rows, descriptions, reports and
text units are searched with Lance full-text search instead (`search_backend`: same terms, same BM25),
and above `vector_ann_min_rows` vectors with a Lance ANN index; linking then scores exactly the union of
the best `candidate_depth` lexical and vector candidates and the exact title matches, and deepens both
lists until the k-th score beats what any entity outside them could score (exact up to ANN recall).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import FrozenInstanceError, dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from shared_context.bm25 import BM25
from shared_context.boilerplate_marks import boilerplate_weights
from shared_context.lexical_store import Pruned, StoredPhrases, pruned_top, stored_bm25, stored_phrases
from shared_context.lexical_store import scores_at as pruned_scores_at
from shared_context.records import Entity, array_of, texts_of, values_of
from shared_context.search_backend import (
    Hits,
    LanceLexical,
    LexicalSearch,
    VectorTable,
    build_lexical_table,
    lance_table,
    search_params,
    vector_search,
    vector_table,
    weighted_top_k,
)
from shared_context.search_store import content_check, field_folder
from shared_context.tables import per_index_cache
from shared_context.text import (
    CJK_RE,
    STOPWORDS,
    lexical_term_ids,
    lexical_terms,
    plural_stem,
    tokens,
)

if TYPE_CHECKING:
    from lancedb.db import DBConnection

    from shared_context.index import Index

__all__ = [
    "LinkResult",
    "LinkedEntity",
    "exact_tokens",
    "lexical_index",
    "lexical_scores",
    "lexical_search",
    "lexical_terms",
    "lexical_top",
    "link_entities",
]

_MAX_EXACT_NGRAM = 16
_TITLE_BOOST = 2.0
# Leading words dropped from a title to form its alias ("THE GHOST" -> "GHOST", "MR. FEZZIWIG" -> "FEZZIWIG").
_ALIAS_PREFIXES = ("the", "a", "an", "mr", "mrs", "ms", "miss", "dr", "sir", "lady", "lord", "saint", "st")

Table = Literal["entities", "reports", "text_units"]
Sparse = tuple[np.ndarray, np.ndarray]  # (entity positions ascending, values): every other entity has 0


# ---------------------------------------------------------------------------- tokenisation

def exact_tokens(text: str) -> list[str]:
    """Tokens for phrase matching: stemmed words, and single characters for CJK runs."""
    out: list[str] = []
    for run in tokens(text.lower()):
        if CJK_RE.match(run):
            out.extend(run)
        else:
            out.append(plural_stem(run))
    return out


def lexical_index(texts: Sequence[str]) -> BM25:
    """BM25 over one text field, float32 to keep large tables small: the terms of whole columns at a time
    (`text.lexical_term_ids`, the same terms as `lexical_terms` per text), streamed a chunk at a time."""
    vocab: dict[str, int] = {}
    return BM25.from_term_ids(lexical_term_ids(texts, vocab), vocab, dtype=np.float32)


_SEP = "\x1f"  # joins a title's normalised tokens into one phrase key (never inside a token)


@dataclass
class _EntityLinkIndex:
    titles: BM25  # always in memory (memory-mapped when stored): `_is_known` reads its postings
    descriptions: LexicalSearch  # a BM25, or Lance FTS above the on-disk threshold
    exact: dict[str, list[int]] | StoredPhrases  # normalised title tokens joined by _SEP -> positions
    alias: dict[str, list[int]] | StoredPhrases  # the same for aliases
    max_ngram: int
    degree: np.ndarray
    entities: Sequence[Entity]
    _title_upper: dict[str, int] | None = None

    @property
    def title_upper(self) -> dict[str, int]:
        """Upper-cased title -> first position; only include/exclude names need it, so built on demand."""
        if self._title_upper is None:
            table: dict[str, int] = {}
            for pos, title in enumerate(values_of(self.entities, "title", str)):
                table.setdefault(title.strip().upper(), pos)
            self._title_upper = table
        return self._title_upper


def _alias_key(key: tuple[str, ...]) -> tuple[str, ...] | None:
    rest = key
    while rest and rest[0] in _ALIAS_PREFIXES:
        rest = rest[1:]
    if rest and rest != key and not all(t in STOPWORDS for t in rest):
        return rest
    return None


def _build_phrases(entities: Sequence[Entity]) -> tuple[dict[str, dict[str, list[int]]], int]:
    exact: dict[str, list[int]] = {}
    alias: dict[str, list[int]] = {}
    longest = 1
    for pos, title in enumerate(values_of(entities, "title", str)):
        key = tuple(exact_tokens(title))
        if not key or all(t in STOPWORDS for t in key):
            continue
        exact.setdefault(_SEP.join(key), []).append(pos)
        longest = max(longest, len(key))
        akey = _alias_key(key)
        if akey is not None:
            alias.setdefault(_SEP.join(akey), []).append(pos)
    return {"exact": exact, "alias": alias}, longest


def _build_entity_index(index: Index) -> _EntityLinkIndex:
    entities: Sequence[Entity] = index.entities

    def titles() -> Sequence[str]:
        return texts_of(entities, "title")

    folder, check = None, ""
    if _persisted(index, len(entities)):
        folder, check = field_folder(index, "phrases.entities.title", titles), content_check(titles())
    phrases, longest = stored_phrases(folder, lambda: _build_phrases(entities), check)
    return _EntityLinkIndex(
        titles=_stored_index(index, "entities.title", titles),
        descriptions=lexical_search(index, "entities"),
        exact=phrases["exact"],
        alias=phrases["alias"],
        max_ngram=min(longest, _MAX_EXACT_NGRAM),
        degree=array_of(entities, "degree"),
        entities=entities,
    )


def _entity_index(index: Index) -> _EntityLinkIndex:
    return per_index_cache(index, "linking.entities", lambda: _build_entity_index(index))


def _texts(index: Index, table: Table) -> Sequence[str]:
    """The text BM25 indexes for each record of `table` (entities: their descriptions; titles apart);
    read in place from a `RecordTable`'s column (`texts_of`), never all held as Python strings."""
    if table == "entities":
        return texts_of(index.entities, "description")
    if table == "reports":
        return [f"{r.title}\n{r.full_content or r.summary}" for r in index.community_reports]
    if table == "text_units":
        return texts_of(index.text_units, "text")
    raise ValueError(f"unknown table {table!r}; expected 'entities', 'reports' or 'text_units'")


def _persisted(index: Index, rows: int) -> bool:
    """Whether a lexical table of `rows` rows is kept in the search cache: always for an index read from
    files (a later process maps it instead of importing SciPy to build it again: most of a small index's
    first question from the command line), from `persist_min_rows` rows for one built in memory."""
    return getattr(index, "derived_store", None) is not None or rows >= search_params(index).persist_min_rows


def _stored_index(index: Index, field: str, texts: Callable[[], Sequence[str]]) -> BM25:
    """The in-memory BM25 of one field, read from the search cache when this index content was seen
    before (see `_persisted`), else built (and stored)."""
    items = texts()
    if not _persisted(index, len(items)):
        return lexical_index(items)
    folder = field_folder(index, f"bm25.{field}", lambda: items)
    return stored_bm25(folder, lambda: lexical_index(items), content_check(items))


def _table_index(index: Index, table: Table) -> BM25:
    if table == "entities":  # descriptions only; lexical_scores adds the boosted titles
        return per_index_cache(
            index,
            "linking.entities.description",
            lambda: _stored_index(index, "entities.description", lambda: _texts(index, table)),
        )
    return per_index_cache(
        index, f"linking.{table}", lambda: _stored_index(index, table, lambda: _texts(index, table))
    )


def _lance_index(index: Index, table: Table) -> LanceLexical:
    def build() -> LanceLexical:
        texts = _texts(index, table)
        folder = field_folder(index, f"fts.{table}", lambda: texts)
        check = content_check(texts)

        def build_table(db: DBConnection) -> None:
            build_lexical_table({"terms": [" ".join(lexical_terms(t)) if t else "" for t in texts]})(db)

        lance = lance_table(folder, build_table, check)
        return LanceLexical(lance, "terms", len(texts))

    return per_index_cache(index, f"linking.fts.{table}", build)


def lexical_search(index: Index, table: Table) -> LexicalSearch:
    """The search serving `table`'s BM25 (entities: descriptions): in memory below
    `SearchParams.lexical_on_disk_min_rows` rows, else Lance full-text search."""
    rows = {"entities": index.entities, "reports": index.community_reports, "text_units": index.text_units}
    if table not in rows:
        raise ValueError(f"unknown table {table!r}; expected 'entities', 'reports' or 'text_units'")
    if len(rows[table]) >= search_params(index).lexical_on_disk_min_rows:
        return _lance_index(index, table)
    return _table_index(index, table)


def lexical_top(index: Index, table: Table, query: str, k: int) -> Hits:
    """(positions, raw BM25 scores) of the `k` best records of `table` with a positive score, best
    first, ties by position; the same ranking as `lexical_scores` (entities: 2 x title + description)."""
    terms = lexical_terms(query)
    if table == "entities":
        ent = _entity_index(index)
        return weighted_top_k([(_TITLE_BOOST, ent.titles), (1.0, ent.descriptions)], terms, k)
    return lexical_search(index, table).top_k(terms, k)


def lexical_scores(index: Index, table: Table, query: str) -> np.ndarray:
    """Raw BM25 score of every record of `table` (aligned with the index's list) for `query`.

    For entities it is `2 * BM25(title) + BM25(description)`.
    """
    terms = lexical_terms(query)
    if table == "entities":
        ent = _entity_index(index)
        descriptions = _table_index(index, "entities")
        combined: np.ndarray = _TITLE_BOOST * ent.titles.scores(terms) + descriptions.scores(terms)
        return combined
    return _table_index(index, table).scores(terms)


# ---------------------------------------------------------------------------- results


class LinkedEntity:
    """One linked entity: its position, its record and its scores. Immutable.

    The record is read on first access to `entity` when linking passed the table instead
    (`LinkedEntity.of`): building a context reads only the fields it shows, straight from the columns,
    so a question does not make (and page in every column of) ten whole entity records it never reads.
    Equality, `repr` and pickling are those of a frozen dataclass over the fields below."""

    __slots__ = ("_entity", "_records", "exact", "included", "lexical", "position", "score", "semantic")
    _FIELDS = ("position", "entity", "score", "exact", "lexical", "semantic", "included")

    position: int
    score: float  # merged, in [0, 1]
    exact: bool
    lexical: float  # normalised to [0, 1] (best lexical match of the query = 1)
    semantic: float  # normalised to [0, 1] (best cosine of the query = 1); 0 when not used
    included: bool  # forced by include_entity_names
    _entity: Entity | None  # None until first read from `_records`
    _records: Sequence[Entity] | None

    def __init__(
        self,
        position: int,
        entity: Entity | None,
        score: float,
        exact: bool,
        lexical: float,
        semantic: float,
        included: bool = False,
        *,
        records: Sequence[Entity] | None = None,
    ) -> None:
        if entity is None and records is None:
            raise ValueError("LinkedEntity needs its entity or the records to read it from")
        values = (position, score, exact, lexical, semantic, included, entity, records)
        for name, value in zip(("position", "score", "exact", "lexical", "semantic", "included", "_entity",
                                "_records"), values, strict=True):
            object.__setattr__(self, name, value)

    @classmethod
    def of(cls, records: Sequence[Entity], position: int, score: float, exact: bool, lexical: float,
           semantic: float, included: bool = False) -> LinkedEntity:
        """A linked entity whose record is `records[position]`, read when first asked for."""
        return cls(position, None, score, exact, lexical, semantic, included, records=records)

    @property
    def entity(self) -> Entity:
        entity: Entity | None = self._entity
        if entity is None:
            assert self._records is not None
            entity = self._records[self.position]
            object.__setattr__(self, "_entity", entity)
            object.__setattr__(self, "_records", None)
        return entity

    @property
    def title(self) -> str:
        return self.entity.title

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, LinkedEntity)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # as the dataclass: its Entity is unhashable

    def __repr__(self) -> str:
        return "LinkedEntity(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._FIELDS, self._values(),
                                                                       strict=True)) + ")"

    def __reduce__(self) -> tuple[type[LinkedEntity], tuple[object, ...]]:
        return (LinkedEntity, self._values())


@dataclass
class LinkResult:
    entities: list[LinkedEntity]
    mode: str  # "exact+lexical" or "exact+lexical+embedding"
    query_text: str
    notes: list[str] = field(default_factory=list)
    unknown_names: list[str] = field(default_factory=list)

    @property
    def positions(self) -> list[int]:
        return [e.position for e in self.entities]

    @property
    def titles(self) -> list[str]:
        return [e.entity.title for e in self.entities]


# ---------------------------------------------------------------------------- linking


def _exact_strengths(ent: _EntityLinkIndex, tokens: list[str]) -> Sparse:
    """1.0 for a title matched by a maximal phrase, 0.8 for an alias, 0.6 for a title that only occurs
    inside a longer matched title (e.g. CHRISTMAS inside "Ghost of Christmas Past"); matched entities only."""
    strength: dict[int, float] = {}
    spans: list[tuple[int, int, list[int], float]] = []
    for length in range(min(ent.max_ngram, len(tokens)), 0, -1):
        for start in range(len(tokens) - length + 1):
            key = _SEP.join(tokens[start : start + length])
            for table, value in ((ent.exact, 1.0), (ent.alias, 0.8)):
                hit = table.get(key)
                if hit:
                    spans.append((start, start + length, hit, value))
    # Longest spans first; a span is "inside" when a strictly longer one covers it. Such a span starts at
    # most max_ngram tokens before it, so each check looks at that window only (linear in the text, not
    # quadratic: a 30,000-word history turn must not take minutes).
    longer: dict[int, int] = {}  # start -> furthest end of the spans of greater length
    current: dict[int, int] = {}  # the same for the length being processed
    current_length = 0
    for start, end, hits, value in spans:
        if end - start != current_length:
            for s0, e0 in current.items():
                longer[s0] = max(longer.get(s0, 0), e0)
            current, current_length = {}, end - start
        inside = any(longer.get(s0, -1) >= end for s0 in range(max(0, end - ent.max_ngram), start + 1))
        v = 0.6 if inside else value
        for pos in hits:
            strength[pos] = max(strength.get(pos, 0.0), v)
        current[start] = max(current.get(start, 0), end)
    positions = np.fromiter(sorted(strength), dtype=np.int64, count=len(strength))
    return positions, np.fromiter((strength[p] for p in positions.tolist()), dtype=np.float64, count=len(strength))


_QUOTED_RE = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”|(?:^|\s)'([^']{2,80})'(?=\W|$)")
_WORD_RE = re.compile(r"[\w][\w'’.\-]*")
_CONNECTORS = frozenset({"of", "the", "de", "van", "von", "der", "la", "le", "du", "da"})


def _name_spans(query: str) -> list[str]:
    """Quoted spans and runs of capitalised words that look like names.

    A single capitalised word opening a sentence ("Overall, ...", "Considering ...") is capitalised by
    grammar, not because it is a name, so it is not reported; multi-word runs there still are.
    """
    spans = [next(g for g in m.groups() if g) for m in _QUOTED_RE.finditer(query)]
    text = _QUOTED_RE.sub(" ", query)
    current: list[str] = []
    opens_sentence = False

    def flush() -> None:
        while current and current[-1].lower() in _CONNECTORS:
            current.pop()
        if current and not (len(current) == 1 and opens_sentence):
            spans.append(" ".join(current))
        current.clear()

    for match in _WORD_RE.finditer(text):
        bare = match.group().rstrip(".'’")
        low = bare.lower()
        is_cap = bare[:1].isupper() and low not in STOPWORDS and not CJK_RE.match(bare)
        if is_cap or (current and low in _CONNECTORS):
            if not current:
                before = text[: match.start()].rstrip()
                opens_sentence = not before or before[-1] in ".!?:;\n"
            current.append(bare)
        else:
            flush()
    flush()
    return list(dict.fromkeys(s.strip() for s in spans if s.strip()))


def _is_known(ent: _EntityLinkIndex, span: str) -> bool:
    """A span is known when titles/aliases cover it, or its remaining words all occur in one title
    (e.g. "Agent Alex Mercer" = AGENT + ALEX MERCER; "Scrooge" inside EBENEZER SCROOGE)."""
    tokens = exact_tokens(span)
    covered = [False] * len(tokens)
    for length in range(min(ent.max_ngram, len(tokens)), 0, -1):
        for start in range(len(tokens) - length + 1):
            key = _SEP.join(tokens[start : start + length])
            if key in ent.exact or key in ent.alias:
                covered[start : start + length] = [True] * length
    rest = " ".join(t for t, c in zip(tokens, covered, strict=True) if not c)
    terms = lexical_terms(rest)
    if not terms:
        return True
    # shortest posting list first, then binary-search the survivors in the longer ones: a word in a
    # quarter of the titles costs a few probes, not a pass over its postings
    lists = sorted((ent.titles.postings(term) for term in dict.fromkeys(terms)), key=len)
    common = np.asarray(lists[0])
    for docs in lists[1:]:
        if not len(common):
            break
        needles = common.astype(docs.dtype, copy=False)
        slot = np.minimum(np.searchsorted(docs, needles), max(len(docs) - 1, 0))
        common = common[docs[slot] == needles] if len(docs) else common[:0]
    return len(common) > 0


def _resolve_names(
    index: Index, ent: _EntityLinkIndex, names: Sequence[str], notes: list[str], what: str
) -> list[int]:
    out: list[int] = []
    for name in names:
        pos = index.entity_by_title.get(name)
        if pos is None:
            pos = ent.title_upper.get(name.strip().upper())
        if pos is None:
            notes.append(f"{what} entity {name!r} is not in the index")
            continue
        if pos not in out:
            out.append(pos)
    return out


def _semantic(
    index: Index, query_vector: np.ndarray | None, notes: list[str], depth: int
) -> tuple[np.ndarray | None, float]:
    """max(cos, 0) per entity, and the most an entity left at 0 may have (0 when all were computed: in
    memory; with ANN, only the best `depth` are)."""
    table = vector_table(index, "entity_description")
    if query_vector is None:
        if table is not None:
            notes.append(
                f"entity vectors exist (dim {table.dim}{', model ' + table.model if table.model else ''}) "
                "but no query vector was given; linked lexically"
            )
        return None, 0.0
    if table is None:
        notes.append("the index has no entity_description vectors; linked lexically")
        return None, 0.0
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    if q.shape[0] != table.dim:
        notes.append(
            f"entity vectors were made by a model we cannot call (dim {table.dim}"
            f"{', ' + table.model if table.model else ''}; query vector dim {q.shape[0]}); linked lexically"
        )
        return None, 0.0
    full = np.zeros(len(index.entities), dtype=np.float64)
    search = vector_search(index, "entity_description")
    if isinstance(search, VectorTable) or search is None:
        full[table.positions] = np.clip(table.similarities(q).astype(np.float64), 0.0, None)
        return full, 0.0
    hits = search.search(q, depth)  # ANN: only the best candidates get a (exact, re-ranked) similarity
    for pos, sim in hits:
        full[pos] = max(sim, 0.0)
    return full, (max(hits[-1][1], 0.0) if len(hits) >= depth else 0.0)


_LEXICAL_K = 16  # the lexical candidates a text's `LexicalPass` keeps (deepened when a question needs more)


def _memory_lexical(ent: _EntityLinkIndex, terms: list[str], k: int = _LEXICAL_K) -> Pruned:
    """The best `k` (and ties) of 2 x BM25(title) + BM25(description) with descriptions in memory, their
    exact scores and what any other entity can score (`lexical_store.pruned_top`: a word in a large share of the
    titles is read in weight order, not whole)."""
    assert isinstance(ent.descriptions, BM25)
    return pruned_top([(_TITLE_BOOST, ent.titles), (1.0, ent.descriptions)], terms, k)


def _lexical_strengths(
    ent: _EntityLinkIndex,
    terms: list[str],
    exact: Sparse,
    semantic: np.ndarray | None,
    depth: int,
    known: Pruned | None = None,
    k: int = _LEXICAL_K,
) -> tuple[Sparse, float, np.ndarray, bool]:
    """2 x BM25(title) + BM25(description) of the entities that may score (every other entity scores no
    more than the returned cut): the best lexical candidates (in memory: the best `k` and ties, pruned;
    on disk: the best `depth`), the exact matches and the best `depth` semantic candidates; also the cut,
    the candidates, and whether deeper lexical lists could still change the result."""
    parts = [(_TITLE_BOOST, ent.titles), (1.0, ent.descriptions)]
    in_memory = isinstance(ent.descriptions, BM25)
    if in_memory:
        pruned = known if known is not None and known.k >= k else _memory_lexical(ent, terms, k)
        best, cut = pruned.positions, pruned.unseen
        if cut == 0.0:  # every lexical score is known: no candidates beyond them are needed
            universe = np.union1d(best, exact[0])
            others = np.setdiff1d(universe, best, assume_unique=True)
            values = np.zeros(len(universe), dtype=np.float64)
            values[np.searchsorted(universe, best)] = pruned.scores
            if len(others):
                values[np.searchsorted(universe, others)] = pruned_scores_at(parts, terms, others)  # type: ignore[arg-type]
            return (universe, values), 0.0, universe, False
        deeper = pruned.exact  # a budget-capped search would read the same entries again
    else:
        best, best_scores = weighted_top_k(parts, terms, depth)
        cut = float(best_scores[-1]) if len(best) >= depth else 0.0
        deeper = True
    extra = [best, exact[0]]
    if semantic is not None:
        extra.append(np.argsort(-semantic, kind="stable")[:depth])
    candidates = np.unique(np.concatenate(extra)).astype(np.int64)
    values = np.zeros(len(candidates), dtype=np.float64)
    if len(candidates):
        if in_memory:  # the pruned search's exact scores, and the others' by binary search
            have = np.searchsorted(candidates, best)
            values[have] = pruned.scores
            rest = np.ones(len(candidates), dtype=bool)
            rest[have] = False
            values[rest] = pruned_scores_at(parts, terms, candidates[rest])  # type: ignore[arg-type]
        else:
            values[:] = _TITLE_BOOST * ent.titles.scores_at(terms, candidates)
            values += ent.descriptions.scores_at(terms, candidates)
    return (candidates, values), cut, candidates, deeper


def _at(universe: np.ndarray, signal: Sparse) -> np.ndarray:
    """A sparse signal's values at `universe` (sorted positions holding all of the signal's), 0 elsewhere."""
    out = np.zeros(len(universe), dtype=np.float64)
    if len(signal[0]):
        out[np.searchsorted(universe, signal[0])] = signal[1]
    return out


def _semantic_at(index: Index, query_vector: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Exact max(cos, 0) of the entities at `positions` (0 for entities without a vector)."""
    table = vector_table(index, "entity_description")
    assert table is not None

    def rows_of() -> np.ndarray:
        rows = np.full(len(index.entities), -1, dtype=np.int64)
        rows[table.positions] = np.arange(len(table))
        return rows

    rows = per_index_cache(index, f"linking.entity_vector_rows.{id(table)}", rows_of)[positions]
    out = np.zeros(len(positions), dtype=np.float64)
    has = rows >= 0
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(q))
    sims = table.matrix[rows[has]] @ (q / norm if norm > 0 else q)
    out[has] = np.clip(sims.astype(np.float64), 0.0, None)
    return out


def _decided(universe: np.ndarray, score: np.ndarray, taken: set[int], room: int, unseen: float) -> bool:
    """True when the best `room` scores (`score[i]` of entity `universe[i]`; the others score 0) all beat
    `unseen`, what an entity outside the candidates could still score: deeper candidate lists cannot
    change the result."""
    if unseen <= 0 or room <= 0:
        return True
    positive = universe[score > unseen]
    if taken:
        positive = positive[~np.isin(positive, np.fromiter(taken, dtype=np.int64))]
    return len(positive) >= room


@dataclass(frozen=True)
class LexicalPass:
    """The part of linking one text that does not depend on a query vector: exact-name strengths, the
    lexical terms, BM25 strengths when every description is in memory, and the unknown names. A
    checked `Question` keeps it, so a question linked by text (classifier) and then with its vector (engine)
    is analysed once."""

    text: str
    exact: Sparse  # (positions, strengths) of the entities matched by name
    terms: list[str]
    lexical: Pruned | None  # None when descriptions are on disk: candidates then depend on the vector
    unknown_names: list[str]


def lexical_pass(index: Index, text: str) -> LexicalPass:
    """The vector-independent half of `link_entities` for `text` (the query and history already joined)."""
    ent = _entity_index(index)
    exact = _exact_strengths(ent, exact_tokens(text))
    terms = lexical_terms(text)
    lexical = _memory_lexical(ent, terms) if isinstance(ent.descriptions, BM25) else None
    unknown = [s for s in _name_spans(text) if not _is_known(ent, s)]
    return LexicalPass(text, exact, terms, lexical, unknown)


def name_spans(text: str) -> list[str]:
    """The quoted spans and runs of capitalised words of `text` that look like names (what linking reports as
    unknown names when no title covers them)."""
    return _name_spans(text)


def exact_matches(index: Index, text: str) -> Sparse:
    """(positions, strengths) of the entities `text` names by title (1.0) or alias (0.8), or only inside a longer
    matched title (0.6): the exact half of linking, without BM25 (the index router probes every index with it)."""
    return _exact_strengths(_entity_index(index), exact_tokens(text))


def link_entities(
    index: Index,
    query: str,
    *,
    history_turns: Sequence[str] = (),
    query_vector: np.ndarray | None = None,
    k: int = 10,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    analysed: LexicalPass | None = None,
) -> LinkResult:
    """Rank the index's entities for `query` (+ `history_turns`, newest first) and keep the best `k`.

    Merge formula (documented contract):
        lexical  = BM25 / max BM25 over entities               (in [0, 1])
        semantic = max(cos, 0) / max over entities             (in [0, 1]; only with a usable vector)
        base     = lexical                    without embedding
                 = 0.5 * lexical + 0.5 * semantic   with embedding
        score    = 0.5 * exact + 0.5 * base * w   where exact is 1.0 (title), 0.8 (alias), 0.6 (title
                                              nested in a longer matched title) or 0, and w is the entity's
                                              boilerplate weight (`boilerplate_marks`: 1 unless only licence
                                              or front/back matter supports it; with an empty query, the
                                              degree order is weighted the same way)
    so every full-title match (score >= 0.5) ranks above every entity without an exact match.
    Ties go to the higher-degree entity, then the lower position. Included names come first (score 1),
    excluded names are removed from everything, and the result never holds more than
    max(k, number of included entities).

    `analysed`: the `lexical_pass` of this same text, computed earlier (reused only when its text matches).
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if isinstance(history_turns, str):
        history_turns = [history_turns]
    text = "\n".join([query or "", *[t for t in history_turns if t]]).strip()
    n = len(index.entities)
    notes: list[str] = []
    if n == 0:
        return LinkResult([], "exact+lexical", text, ["the index has no entities"], [])
    ent = _entity_index(index)
    excluded = set(_resolve_names(index, ent, exclude, notes, "excluded"))
    included = [p for p in _resolve_names(index, ent, include, notes, "included") if p not in excluded]

    depth = search_params(index).candidate_depth
    semantic, semantic_cut = _semantic(index, query_vector, notes, depth) if text else (None, 0.0)
    mode = "exact+lexical+embedding" if semantic is not None else "exact+lexical"
    linked: list[LinkedEntity] = [
        LinkedEntity.of(index.entities, p, 1.0, True, 0.0, 0.0, included=True) for p in included
    ]
    taken = set(included) | excluded
    room = max(k - len(linked), 0)

    boilerplate = boilerplate_weights(index)
    if not text:
        notes.append("empty query: entities ranked by degree")
        degree = ent.degree if boilerplate is None else ent.degree * boilerplate.entities
        order = np.lexsort((np.arange(n), -degree))
        for p in order.tolist():
            if len(linked) >= max(k, len(included)):
                break
            if p not in taken:
                linked.append(LinkedEntity.of(index.entities, p, 0.0, False, 0.0, 0.0))
        return LinkResult(linked, mode, text, notes, [])

    done = analysed if analysed is not None and analysed.text == text else lexical_pass(index, text)
    exact, terms = done.exact, done.terms
    # Scores are kept for the `universe` of entities that can score above 0 (matched by name, sharing a
    # term, or with a positive similarity), never for every entity: a question's cost follows its matches.
    lexical_k = max(_LEXICAL_K, room + len(taken))
    while True:  # deepen the candidate lists until the top is decided
        lex, lexical_cut, candidates, deeper = _lexical_strengths(
            ent, terms, exact, semantic, depth, done.lexical, lexical_k
        )
        if not deeper:  # the lexical side is as deep as its budget goes: it decides nothing more
            lexical_cut = 0.0
        if semantic is None or semantic_cut <= 0:
            if semantic is not None and depth < n and lexical_cut > 0:  # candidates hold the best `depth` similarities
                semantic_cut = float(np.partition(semantic, n - depth)[n - depth])
        elif query_vector is not None:  # ANN: the lexical candidates get their exact similarity too
            semantic[candidates] = _semantic_at(index, query_vector, candidates)
        parts = [exact[0], lex[0]] + ([np.flatnonzero(semantic > 0)] if semantic is not None else [])
        universe = np.unique(np.concatenate(parts)).astype(np.int64)
        lexical = _at(universe, lex)
        top = float(lex[1].max()) if len(lex[1]) else 0.0
        if top > 0:
            lexical /= top
            lexical_cut /= top
        base, unseen = lexical, lexical_cut
        similarity = None
        if semantic is not None:
            best = float(semantic.max())
            if best > 0:
                semantic = semantic / best
                semantic_cut /= best
            similarity = semantic[universe]
            base = 0.5 * lexical + 0.5 * similarity
            unseen = 0.5 * lexical_cut + 0.5 * semantic_cut
        matched = _at(universe, exact)
        if boilerplate is not None:  # an entity only licence text supports ranks low unless named
            base = base * boilerplate.entities[universe]
        score = 0.5 * matched + 0.5 * base
        if depth >= n or _decided(universe, score, taken, room, 0.5 * unseen):
            break
        depth *= 4
        lexical_k *= 4
        semantic, semantic_cut = _semantic(index, query_vector, [], depth)

    if room:
        rows = np.flatnonzero(score > 0)
        if taken:
            rows = rows[~np.isin(universe[rows], np.fromiter(taken, dtype=np.int64))]
        if len(rows) > room:
            # keep everything tied with the room-th best, then order exactly
            cut = np.partition(score[rows], len(rows) - room)[len(rows) - room]
            rows = rows[score[rows] >= cut]
        positions = universe[rows]
        order = rows[np.lexsort((positions, -ent.degree[positions], -score[rows]))][:room]
        for i in order.tolist():
            p = int(universe[i])
            linked.append(
                LinkedEntity.of(
                    index.entities,
                    p,
                    float(score[i]),
                    bool(matched[i] > 0),
                    float(lexical[i]),
                    float(similarity[i]) if similarity is not None else 0.0,
                )
            )
    if len(linked) == len(included):
        notes.append("no entity matched the query")
    return LinkResult(linked, mode, text, notes, list(done.unknown_names))
