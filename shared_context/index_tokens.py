"""Token counts of every record's main text, for the index: read from the derived store, or counted on
worker threads started at the beginning of a load (`token_counts.count_texts`) while the graph and links
are derived, then stored. The text units also get their `TokenAnchors` from the same encodings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from shared_context.derived_entries import DerivedArrays
from shared_context.token_counts import TokenAnchors, TokenCounts, count_texts
from shared_context.tokens import Tokenizer

__all__ = ["LAZY_TOKENS", "TOKEN_FIELDS", "TokenCountLoad", "lazy_token_counts"]

# token-count field -> (record table attribute, text field, the table whose content it depends on: the
# derived store invalidates per table)
TOKEN_FIELDS = {
    "entity_tokens": ("entities", "description", "entities"),
    "relationship_tokens": ("relationships", "description", "relationships"),
    "text_unit_tokens": ("text_units", "text", "text_units"),
    "report_tokens": ("community_reports", "full_content", "community_reports"),
    "report_summary_tokens": ("community_reports", "summary", "community_reports"),
    "claim_tokens": ("claims", "description", "covariates"),
}
# Read by no query (no engine weighs an entity description by its tokens): counted, or read from the
# derived store, on first use instead of at load (100k entities: 22 MB of text, ~1 s of a first load's CPU).
LAZY_TOKENS = ("entity_tokens",)


class Tables(Protocol):
    """What the counts read of the tables being loaded (`index_links.LoadTables`)."""

    def table(self, name: str) -> Sequence[object]: ...


def _entry(name: str, tokenizer: Tokenizer) -> str:
    return f"{name}-{tokenizer.encoding_name}"


class TokenCountLoad:
    """The counts of one load: stored ones read at once, missing ones counting on other threads until
    `finish()` (`cancel()` drops what has not started, for a load that failed meanwhile)."""

    def __init__(self, t: Tables, tokenizer: Tokenizer, derived: DerivedArrays) -> None:
        self.tokenizer = tokenizer
        self.derived = derived
        self.counts: dict[str, np.ndarray] = {}
        self.anchors: TokenAnchors | None = None
        self.missing: list[str] = []
        anchors = derived.stored(self._anchors_entry, ["text_units"])
        for name, (_, _, table) in TOKEN_FIELDS.items():
            if name in LAZY_TOKENS:
                continue
            found = derived.stored(_entry(name, tokenizer), [table])
            if found is None or (name == "text_unit_tokens" and anchors is None):
                self.missing.append(name)
            else:
                self.counts[name] = found["counts"]
        if anchors is not None and "text_unit_tokens" not in self.missing:
            self.anchors = TokenAnchors(anchors["ptr"], anchors["pos"], anchors["before"])
        anchored = [self.missing.index("text_unit_tokens")] if "text_unit_tokens" in self.missing else []
        self.counting: TokenCounts = count_texts(
            tokenizer, [(t.table(TOKEN_FIELDS[name][0]), TOKEN_FIELDS[name][1]) for name in self.missing], anchored
        )

    @property
    def _anchors_entry(self) -> str:
        return _entry("text_unit_token_anchors", self.tokenizer)

    def finish(self) -> tuple[dict[str, np.ndarray], TokenAnchors]:
        """Every non-lazy field's counts (the counted ones stored, then mapped back) and the units' anchors."""
        for i, (name, counts) in enumerate(zip(self.missing, self.counting.result(), strict=True)):
            kept = self.derived.keep(_entry(name, self.tokenizer), [TOKEN_FIELDS[name][2]], {"counts": counts}, [])
            self.counts[name] = kept["counts"]
            if name == "text_unit_tokens":
                empty = np.zeros(0, dtype=np.int32)
                found = self.counting.anchors.get(i) or TokenAnchors(np.zeros(len(counts) + 1, dtype=np.int64),
                                                                     empty, empty)
                arrays = {"ptr": found.ptr, "pos": found.pos, "before": found.before}
                stored = self.derived.keep(self._anchors_entry, ["text_units"], arrays, [])
                self.anchors = TokenAnchors(stored["ptr"], stored["pos"], stored["before"])
        assert self.anchors is not None  # read with the stored counts, or made with the counted ones
        return self.counts, self.anchors

    def cancel(self) -> None:
        self.counting.cancel()


def lazy_token_counts(name: str, records: Sequence[object], tokenizer: Tokenizer, derived: DerivedArrays) -> np.ndarray:
    """One of `LAZY_TOKENS` (`records`: its table): from the derived store, else counted now and stored like
    the others."""
    _, text_field, table = TOKEN_FIELDS[name]
    entry = _entry(name, tokenizer)
    found = derived.stored(entry, [table])
    if found is None:
        (counts,) = count_texts(tokenizer, [(records, text_field)]).result()
        found = derived.keep(entry, [table], {"counts": counts}, [])
    return found["counts"]
