"""Where a question goes after its first engine: escalation that spends only where it can help.

* **An empty or insufficient answer** (nothing found, or the model marked its context as not answering:
  `SearchResult.insufficient`) escalates, within the budget, to the engine the route held back (`fallbacks`),
  else to pre-ranked global search (the cheaper configuration) - but only when the
  index holds evidence the next engine can reach (`has_evidence`). A question the index has nothing on costs
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
# Share of the question's content terms that must occur in the index's text for an expensive escalation to
# have something to find (the named-entity and named-document signals count on their own).
MIN_TERM_COVERAGE = 0.5


def term_coverage(index: Index, question: str) -> float:
    """Share of the question's lexical terms that occur in at least one text unit of the index."""
    from shared_context.linking import lexical_search
    from shared_context.text import lexical_terms

    terms = list(dict.fromkeys(lexical_terms(question)))
    if not terms or not len(index.text_units):
        return 0.0
    search = lexical_search(index, "text_units")
    found = sum(1 for t in terms if len(search.top_k([t], 1)[0]))
    return found / len(terms)


def has_evidence(decision: RouteDecision, coverage: float) -> tuple[bool, str]:
    """Whether the index holds evidence an expensive engine could reach for the question, and what it is."""
    found = decision.signals
    if found.get("specific_entities", found.get("linked_entities", 0.0)) > 0:
        return True, "it names something in the index"
    if found.get("named_documents", 0.0) > 0:
        return True, "it names a document of the index"
    if coverage >= MIN_TERM_COVERAGE:
        return True, f"{coverage:.0%} of its words occur in the index's text"
    return False, (f"the index holds no evidence for it (no name or document of the index, and only {coverage:.0%} "
                   "of its words occur in its text)")


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
