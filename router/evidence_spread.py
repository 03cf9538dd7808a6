"""Where a question's evidence sits: in one document (local search reads it for one call) or spread over several.

DRIFT explores evidence spread over several documents, at about twenty times local search's cost. A DRIFT decision
whose evidence sits in one document goes local:

* the index holds **one document** (always);
* the question **names exactly one document** of the collection ("the FY24 Q2 call", "episode 30") and does not
  ask about the collection as a whole: its evidence is that document, however the other documents share its
  words (a quarter's figures are in every call);
* the question names at most one document and at least `CONCENTRATED_SHARE` of its best passages' weight is in one
  document, or of the text units of the specific things it names (`Probe.named_best_group_share`: a question
  about one book of a library of novels, one guest of a podcast, whose general words - "relationship",
  "motifs", "storyline" - reach passages of every book while the names it asks about occur in one).

DRIFT connects named things: a question that names nothing of the index (no entity by title, no document) gives it
nothing to start from but its primer, whatever its wording (`names_nothing`; "throughout the body" reads as a
corpus-wide scope, but a question about the heart and the blood names nothing DRIFT could start from). The
classifier then sends it where the index has it: global search when its passages spread over the collection, else
local search, the cheapest engine that can say the index does not cover it.

Local is right for such questions at a sixteenth of DRIFT's cost, so the moved decision is at most
`ONE_SOURCE_CEILING` sure (it is wrong only when the question was corpus-wide after all). This reads only the
index probe (`router.index_probe`); the classifier calls `one_source` and keeps its own model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from router.index_profile import MIN_GROUPS

if TYPE_CHECKING:
    from router.index_probe import Probe

CONCENTRATED_SHARE = 0.6
ONE_SOURCE_CEILING = 0.95


def one_source(found: Probe, *, corpus_wide: bool = False) -> bool:
    """The question's evidence sits in one document (see the module docstring). `corpus_wide`: its wording asks
    about the collection as a whole, which a named document does not narrow on its own."""
    if found.groups == 1:
        return True
    if len(found.documents) == 1 and not corpus_wide:
        return True
    if not found.groups_measured or len(found.documents) > 1:
        return False
    passages = found.unit_hits > 0 and found.unit_best_group_share >= CONCENTRATED_SHARE
    return passages or found.named_best_group_share >= CONCENTRATED_SHARE


def one_source_reason(found: Probe) -> str:
    """Why `one_source` holds, in words."""
    if found.groups == 1:
        where = "the index holds one document"
    elif len(found.documents) == 1 and found.unit_best_group_share < CONCENTRATED_SHARE:
        where = f"it names one document, {found.documents[0]}"
    elif found.unit_best_group_share >= CONCENTRATED_SHARE:
        where = f"{found.unit_best_group_share:.0%} of its best passages' weight is in one of {found.groups} documents"
    else:
        where = (f"{found.named_best_group_share:.0%} of the passages of what it names are in one of {found.groups} "
                 "documents")
    return (f"its evidence sits in one document ({where}): local search reads those passages for one call, so "
            "local rather than DRIFT")


def names_nothing(found: Probe) -> bool:
    """No entity of the index named by title (a common noun of the text is no name: "River Tane" linking RIVER), no
    document named: DRIFT would have nothing to start from but its whole primer. Never for a question the index
    cannot read (`Probe.readable`): it found nothing because it could not look."""
    named = found.specific or found.collection_wide
    return found.readable and not named and not found.documents


def drift_ruled_out(signals: Mapping[str, float]) -> str:
    """Why the index rules DRIFT out for a question, from its decision's `signals` (the probe's measurements), or
    '' when it does not: the rules above, for a route the classifier did not make itself (the chat model's second
    opinion must not send a question to DRIFT that names nothing in the index, or whose evidence is in one
    document). No index probed, or a question the index cannot read: ''."""
    if "document_groups" not in signals or signals.get("question_script_in_index", 1.0) == 0.0:
        return ""
    documents = signals.get("named_documents", 0.0)
    if not (signals.get("specific_entities", 0.0) or signals.get("collection_wide_entities", 0.0) or documents):
        return "it names nothing in the index for DRIFT to start from"
    if signals["document_groups"] == 1:
        return "the index holds one document"
    if documents == 1:
        return "it names one document of the collection"
    measured = signals["document_groups"] >= MIN_GROUPS and documents <= 1
    if measured and (signals.get("unit_best_group_share", 0.0) >= CONCENTRATED_SHARE
                     or signals.get("named_best_group_share", 0.0) >= CONCENTRATED_SHARE):
        return "its evidence sits in one document"
    return ""


def drift_needed(signals: Mapping[str, float]) -> str:
    """Why the index shows a DRIFT decision is needed, from its `signals`, or '' when it does not: the question
    names two or more things of the index (entities by title, documents) and the best passages of its evidence
    spread over several documents (or, in an index of too few documents to measure that, several top-level
    communities), none holding `CONCENTRATED_SHARE` of it. Connecting named things whose evidence is told in
    different places is what DRIFT does and local search's one context cannot; the commitment rule then commits
    without the wording having to be sure enough for DRIFT's cost (`router.commitment`)."""
    if "document_groups" not in signals or drift_ruled_out(signals):
        return ""
    named = signals.get("specific_entities", 0.0) + signals.get("named_documents", 0.0)
    if named < 2:
        return ""
    concentrated = max(signals.get("unit_best_group_share", 0.0), signals.get("named_best_group_share", 0.0))
    if signals["document_groups"] >= MIN_GROUPS:
        spread, where = signals.get("unit_groups", 0.0), "documents"
    else:
        spread, where = signals.get("unit_communities", 0.0), "top-level communities"
        concentrated = 0.0  # too few documents for their shares to say anything
    if spread < 2 or concentrated >= CONCENTRATED_SHARE:
        return ""
    return f"the index shows evidence spread over {spread:.0f} {where}"
