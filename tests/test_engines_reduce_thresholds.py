"""DRIFT's reduce is global search's batched reduce (no finding dropped); global `min_score` drops low
map points before the reduce and reports them."""

from __future__ import annotations

import json
import re
from typing import Any

from fixture_paths import DULCE
from test_engines_support import load, loopback_model, map_reply, requests_for, script, srv, system_of

from engines import DriftSearch, GlobalSearch
from engines.config import DriftSearchConfig, GlobalSearchConfig

__all__ = ["srv"]


async def test_drift_reduce_keeps_every_finding_when_they_exceed_its_budget(srv: Any) -> None:
    index = load(DULCE)
    counter = {"n": 0}

    def followup(_: dict[str, Any]) -> str:
        counter["n"] += 1
        text = f"Finding MARK-{counter['n']} " + "with a long explanation of the operation " * 8
        return json.dumps({"response": text + "[Data: Sources (1)]", "score": 50, "follow_up_queries": []})

    primer = json.dumps({"intermediate_answer": "Primer MARK-0 [Data: Reports (1)]", "score": 60,
                         "follow_up_queries": [f"Follow-up {j}?" for j in range(6)]})
    script(srv, "drift_hyde", "A hypothetical report.")
    script(srv, "drift_primer", primer)
    script(srv, "drift_followup", followup)
    script(srv, "drift_reduce", lambda body: "Merged " + " ".join(sorted(set(re.findall(r"MARK-\d+", json.dumps(body))))))
    cfg = DriftSearchConfig(primer_folds=1, n_depth=1, k_followups=6, concurrency=1, reduce_max_tokens=200)
    result = await DriftSearch(index, loopback_model(srv), config=cfg).search("What is Operation Dulce?")
    marks = {"MARK-0"} | {f"MARK-{j}" for j in range(1, counter["n"] + 1)}
    reduce_reqs = requests_for(srv, "drift_reduce")
    first_level = [r for r in reduce_reqs if "Merged" not in system_of(r)]
    assert set(re.findall(r"MARK-\d+", " ".join(system_of(r) for r in first_level))) == marks
    info = result.details["reduce"]
    assert info["points_in"] == len(marks) == 7 and info["points_lost"] == 0
    assert info["levels"] >= 2 and info["calls"] == len(reduce_reqs) > 1
    assert result.usage.stages["reduce"].llm_calls == len(reduce_reqs) == result.details["calls"]["reduce"]


async def test_min_score_drops_low_map_points_before_the_reduce(srv: Any) -> None:
    index = load(DULCE)
    script(srv, "global_map", map_reply(("LOW point [Data: Reports (1)]", 20), ("HIGH point [Data: Reports (1)]", 80),
                                        ("ZERO point [Data: Reports (1)]", 0)))
    script(srv, "global_reduce", "Answer [Data: Reports (1)]")
    cfg = GlobalSearchConfig(min_score=50, max_map_calls=1, concurrency=1)
    result = await GlobalSearch(index, loopback_model(srv), config=cfg).search("What happens?")
    reduce_text = " ".join(system_of(r) for r in requests_for(srv, "global_reduce"))
    assert "HIGH point" in reduce_text and "LOW point" not in reduce_text and "ZERO point" not in reduce_text
    assert result.details["min_score"] == 50
    assert result.details["points_below_min_score"] == 1 and result.details["points_kept"] == 1


async def test_default_min_score_keeps_graphrags_rule(srv: Any) -> None:
    index = load(DULCE)
    script(srv, "global_map", map_reply(("LOW point [Data: Reports (1)]", 1), ("ZERO point [Data: Reports (1)]", 0)))
    script(srv, "global_reduce", "Answer [Data: Reports (1)]")
    result = await GlobalSearch(index, loopback_model(srv), config=GlobalSearchConfig(max_map_calls=1)).search("Why?")
    reduce_text = " ".join(system_of(r) for r in requests_for(srv, "global_reduce"))
    assert "LOW point" in reduce_text and "ZERO point" not in reduce_text
    assert result.details["points_below_min_score"] == 0
