"""One `QueryPlan` per question: what the pipeline computes once and hands on.

The router makes it (`engines.inputs.plan_question`: the question is checked once), the classifier links
entities through it, an estimate keeps the context it built in it, and the engine that answers takes it
instead of checking, linking and building again. Linking and a built context are reused only where the
engine would compute exactly the same thing: lexical linking of the same text with the same `k` (no query
vector, no history), and a context built for the same text with no history and no query vector. With a
query vector the engine links again, but on the plan's `LexicalPass` (the vector-independent half: exact
names, lexical terms and BM25), so the text is analysed once and only the vector's scores are added.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from shared_context.index import Index
    from shared_context.linking import LexicalPass, LinkResult
    from shared_context.local_context import LocalContext


@dataclass
class QueryPlan:
    question: str  # stripped
    link_text: str  # the question as used for linking (cut to the linking limit)
    note: str | None = None  # why the linking text differs from the question, if it does
    links: dict[int, LinkResult] = field(default_factory=dict)  # k -> lexical linking of link_text
    contexts: dict[str, tuple[str, LocalContext]] = field(default_factory=dict)  # engine -> (text, context built for it)
    analysed: LexicalPass | None = None  # the vector-independent half of linking link_text

    def lexical(self, index: Index) -> LexicalPass:
        """Exact names, lexical terms and BM25 strengths of `link_text`, computed once."""
        if self.analysed is None:
            from shared_context.linking import lexical_pass

            self.analysed = lexical_pass(index, self.link_text)
        return self.analysed

    def link(self, index: Index, k: int = 10, query_vector: np.ndarray | None = None) -> LinkResult:
        """Linking of `link_text` (no history): without a vector computed once per `k`; with one, the
        vector's scores merged into this plan's lexical pass."""
        from shared_context.linking import link_entities

        if query_vector is not None:
            return link_entities(index, self.link_text, query_vector=query_vector, k=k, analysed=self.lexical(index))
        if k not in self.links:
            self.links[k] = link_entities(index, self.link_text, k=k, analysed=self.lexical(index))
        return self.links[k]

    def linker(self, index: Index) -> Callable[[str], LinkResult]:
        """`text -> LinkResult` that reuses this plan's linking when `text` is the plan's own."""
        from shared_context.linking import link_entities

        def link(text: str) -> LinkResult:
            return self.link(index) if text == self.link_text else link_entities(index, text)

        return link

    def keep_context(self, engine: str, text: str, context: LocalContext) -> None:
        self.contexts[engine] = (text, context)

    def context_for(self, engine: str, text: str) -> LocalContext | None:
        """The context an estimate built for `engine` from the same `text`, else None."""
        kept = self.contexts.get(engine)
        return kept[1] if kept is not None and kept[0] == text else None
