"""The hand-written `to_dict`s of what every service response carries (citations, usage) stay exactly what
`dataclasses.asdict` gives, with copies of the lists, whatever fields are added later."""

from __future__ import annotations

import dataclasses

from engines.citations import Citation
from engines.models.base import StageUsage, Usage


def test_citation_to_dict_is_asdict_with_copied_lists() -> None:
    c = Citation("Sources", "7", ["tu-1"], ["doc-1"], ["A Christmas Carol"], resolved=False, in_context=True)
    d = c.to_dict()
    assert d == dataclasses.asdict(c) and list(d) == [f.name for f in dataclasses.fields(Citation)]
    d["text_unit_ids"].append("changed")
    assert c.text_unit_ids == ["tu-1"]


def test_usage_to_dict_is_asdict() -> None:
    s = StageUsage(llm_calls=2, prompt_tokens=10, output_tokens=3, cost=0.5, estimated=True, embedding_calls=1)
    assert s.to_dict() == dataclasses.asdict(s) and list(s.to_dict()) == [f.name for f in dataclasses.fields(s)]
    u = Usage({"answer": s})
    assert u.to_dict() == {"stages": {"answer": dataclasses.asdict(s)}, "total": dataclasses.asdict(u.total)}
