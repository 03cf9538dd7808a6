"""Where a question goes after its first engine: escalation that spends only where it can help.

* **An empty or insufficient answer** (nothing found, or the model marked its context as not answering:
  `SearchResult.insufficient`) escalates, within the budget, to the engine the route held back (`fallbacks`),
  else to pre-ranked global search (the cheaper configuration) - but only when the
  index holds evidence the next engine can reach (`has_evidence`: a named document, or the question's words
  meeting in one passage). A question the index has nothing on costs
  at most one more call (basic search, for an empty answer) and the answer says so.
* **A failed engine** falls back to engines that need no JSON when its structured output failed. A model
  endpoint that is down, silent or answering 5xx (`endpoint_failure`) is not retried through another engine:
  every engine would call the same endpoint, so the question fails fast naming the engine that met it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from router.classifier import RouteDecision
    from shared_context.index import Index

# Where to go when an engine finds nothing (no linked entities, every map score 0, empty context).
EMPTY_NEXT: dict[str, tuple[str, ...]] = {
    "local": ("global_prerank", "basic"),
    "global": ("local", "basic"),
    "drift": ("global_prerank", "basic"),
    "global_prerank": ("local", "basic"),
    "basic": (),
}
# Where to go when an engine fails other than at its endpoint (e.g. a small model that cannot write JSON):
# engines needing no JSON.
FALLBACK: dict[str, tuple[str, ...]] = {
    "drift": ("local", "basic"),
    "global": ("local", "basic"),
    "global_prerank": ("local", "basic"),
    "local": ("basic",),
    "basic": (),
}
CHEAP = frozenset(("local", "basic"))
# Where an insufficient local or basic answer goes when the route held nothing back (the classifier chose local):
# the cheapest step that reads beyond local's context. DRIFT's twenty calls only when the route held DRIFT back.
INSUFFICIENT_NEXT = "global_prerank"
# How many of the question's content terms must meet in one passage of the index for an expensive escalation to
# have something to find (all of them when the question has fewer). Words that occur somewhere in a large index are
# no evidence: most English words do ("Purple giraffes compute the velocity of Tuesday's melodies?" finds each of
# its words in a library of novels, but never more than two in one passage); a question the index covers has
# several of its words together in some passage.
MIN_MEETING_TERMS = 3
UNIT_DEPTH = 10  # best passages (BM25) looked at
MIN_NAMED = 2  # specific names of the index that are evidence on their own


def term_coverage(index: Index, question: str) -> float:
    """How far the question's content terms meet in one passage: the most of them any of its best passages holds,
    over `MIN_MEETING_TERMS` (or over all its terms when it has fewer), at most 1. 1 means evidence."""
    from shared_context.linking import lexical_top
    from shared_context.records import field_of
    from shared_context.text import lexical_terms

    terms = set(lexical_terms(question))
    if not terms or not len(index.text_units):
        return 0.0
    positions, _ = lexical_top(index, "text_units", question, UNIT_DEPTH)
    text = field_of(index.text_units, "text")
    met = max((len(terms & set(lexical_terms(str(text(int(p)) or "")))) for p in positions), default=0)
    return min(1.0, met / min(MIN_MEETING_TERMS, len(terms)))


def has_evidence(decision: RouteDecision, coverage: float) -> tuple[bool, str]:
    """Whether the index holds evidence an expensive engine could reach for the question, and what it is:
    a document of the index named, or its words meeting in one passage (`term_coverage`). A name alone is not
    enough: a made-up sentence can link a common word that is an entity title ("lighthouse"); two are (how two
    things of the index connect is what a wider search can find, even when no passage holds both)."""
    found = decision.signals
    if found.get("named_documents", 0.0) > 0:
        return True, "it names a document of the index"
    if found.get("specific_entities", 0.0) >= MIN_NAMED:
        return True, "it names several things of the index"
    if coverage >= 1.0:
        return True, "its words meet in passages of the index"
    return False, ("the index holds no evidence for it (it names no document and at most one thing of the index, "
                   f"and no passage holds more than {coverage * MIN_MEETING_TERMS:.0f} of its words together)")


def next_engines(current: str, decision: RouteDecision, *, empty: bool, insufficient: bool,
                 evidence: bool) -> tuple[str, ...]:
    """The engines to try after `current` answered empty or insufficient, best first."""
    held_back = tuple("global_prerank" if e == "global" else e for e in decision.fallbacks)
    if not evidence:  # nothing for an expensive engine to find: one cheap step at most, for an empty answer
        return tuple(e for e in (*held_back, *EMPTY_NEXT.get(current, ())) if e == "basic") if empty else ()
    if empty:
        return (*held_back, *EMPTY_NEXT.get(current, ()))
    if insufficient and current in CHEAP:
        return held_back or (INSUFFICIENT_NEXT,)
    return ()


def endpoint_failure(err: BaseException) -> bool:
    """The model endpoint itself failed (unreachable, silent, rate-limited or 5xx after its retries, or a body
    that is no reply), here or in what the error was raised from: every engine would meet the same endpoint."""
    from engines.models.errors import (
        ModelResponseError,
        ModelTimeoutError,
        ModelUnavailableError,
        RateLimitError,
    )

    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ModelUnavailableError | ModelTimeoutError | RateLimitError):
            return True
        if isinstance(cur, ModelResponseError) and (cur.status_code is None or cur.status_code >= 500):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def worth_falling_back(err: BaseException) -> bool:
    """Another engine can succeed where this one failed: not when the endpoint is down or the model unusable
    for every engine (bad configuration, rejected key, unknown model)."""
    from engines.models.errors import ModelConfigError, ModelResponseError

    if isinstance(err, ModelConfigError) or endpoint_failure(err):
        return False
    return not (isinstance(err, ModelResponseError) and err.status_code in (401, 403, 404))
