"""Answer grading: offline measures, the LLM judge against the loopback server (scripted verdicts), and
`route-bench --grade` end to end (offline, and with the loopback server answering and judging)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixture_paths import CAROL
from test_engines_support import load, loopback_model, requests_for, script, srv

from benchmarks import route_bench
from benchmarks.grading import (
    Judge,
    NeedsRealModel,
    answer_recall,
    answer_sentences,
    citation_validity,
    evidence_recall,
    token_f1,
)
from engines.citations import Citation

__all__ = ["srv"]

GOLD = [
    {"id": "a1", "question": "Who is Bob Cratchit?", "answer": "Scrooge's clerk", "question_type": "Fact Retrieval",
     "evidence": "Bob Cratchit is the clerk of Scrooge; Cratchit works in the counting-house", "label": "local"},
    {"id": "a2", "question": "What are the main themes of the story?", "answer": "Redemption and generosity",
     "question_type": "Contextual Summarize", "evidence": "The story is about redemption", "label": "global"},
]


def test_token_f1_and_answer_recall_ignore_references_and_labels() -> None:
    assert token_f1("Scrooge's clerk [Data: Sources (1, 2)]", "Scrooge's clerk") == 1.0
    assert token_f1("**Answer (offline):**\n\nHe is the clerk", "the clerk of Scrooge") == pytest.approx(2 / 3)
    assert token_f1("Marley", "Scrooge's clerk") == 0.0
    assert answer_recall("A long answer naming the clerk among many other words", "the clerk") == 1.0
    assert answer_recall("x", "") is None


def test_evidence_recall_counts_evidence_terms_found_in_the_context() -> None:
    assert evidence_recall(["Bob Cratchit is the clerk"], "Cratchit, a clerk, and Bob") == 1.0
    assert evidence_recall(["Bob Cratchit is the clerk", "Tiny Tim is ill"], "Cratchit the clerk") == pytest.approx(2 / 6)
    assert evidence_recall([], "anything") is None


def test_citation_validity_counts_resolved_in_context_citations_only() -> None:
    cites = [Citation("Sources", "1", in_context=True), Citation("Entities", "3", resolved=False, in_context=False),
             Citation("Entities", "999", resolved=False, exists=False)]
    assert citation_validity(cites) == (3, 1)


def test_answer_sentences_drop_headings_labels_and_references() -> None:
    text = "**Answer (offline extractive model):**\n\n## Findings\n- Bob is the clerk [Data: Sources (1)].\n- He is poor."
    assert answer_sentences(text) == ["Bob is the clerk.", "He is poor."]


def test_judge_refuses_the_offline_model() -> None:
    from engines.models.offline import OfflineChatModel

    with pytest.raises(NeedsRealModel, match="needs a real model"):
        Judge(OfflineChatModel(), load(CAROL).tokenizer)


async def test_judge_grades_with_scripted_verdicts_and_counts_its_own_calls(srv: Any) -> None:
    script(srv, "judge_answer", '{"verdict": "partially", "reason": "names the clerk but not whose"}')
    script(srv, "judge_faithfulness", '{"sentences": [{"id": 1, "supported": true}, {"id": 2, "supported": false}]}')
    script(srv, "judge_context", '{"evidence_found": [1], "relevant_records": [2, 7]}')
    judge = Judge(loopback_model(srv), load(CAROL).tokenizer)
    grade = await judge.grade(
        "Who is Bob Cratchit?", "Bob is a clerk [Data: Sources (1)]. He lives on the moon.",
        gold_answer="Scrooge's clerk", evidence=["Bob is Scrooge's clerk", "Bob is poor"],
        cited=[("Sources", "1", "Bob Cratchit, the clerk")],
        context=[("Sources", "1", "Bob Cratchit, the clerk"), ("Entities", "4", "BOB: clerk"), ("Sources", "2", "x")])
    assert (grade.verdict, grade.score, grade.reason) == ("partially", 0.5, "names the clerk but not whose")
    assert grade.faithfulness == 0.5 and grade.sentences_judged == 2
    assert grade.context_recall == 0.5 and grade.context_precision == pytest.approx(1 / 3)  # id 7 is not a record
    assert grade.usage.total.llm_calls == 3 == len(srv.chat_requests) and grade.usage.total.cost > 0
    assert list(grade.usage.stages) == ["judge"] and not grade.errors
    (answer_req,) = requests_for(srv, "judge_answer")
    system = answer_req.body["messages"][0]["content"]
    # References are not the judge's business: the candidate is shown without them.
    assert "-----Gold Answer-----" in system and "\n1|Bob is a clerk. He lives on the moon.\n" in system


async def test_judge_reply_that_is_not_json_is_an_error_not_a_number(srv: Any) -> None:
    script(srv, "judge_answer", "I think it is fine")
    grade = await Judge(loopback_model(srv), load(CAROL).tokenizer).grade(
        "Who?", "Bob is the clerk of Scrooge.", gold_answer="Bob", evidence=[], cited=[], context=[])
    assert grade.verdict is None and grade.score is None and grade.errors
    assert grade.faithfulness == 0.0  # nothing cited supports the sentence
    assert grade.usage.total.llm_calls >= 1  # the failed calls are still counted


@pytest.fixture()
def gold_file(tmp_path: Path) -> Path:
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in GOLD) + "\n", encoding="utf-8")
    return path


def _run(argv: list[str], out: Path) -> tuple[int, dict[str, Any]]:
    code = route_bench.main([*argv, "--out", str(out), "--no-progress", "--quiet"])
    return code, json.loads((out / "report.json").read_text(encoding="utf-8"))


def test_route_bench_grades_offline_and_compares_both_routers(gold_file: Path, tmp_path: Path) -> None:
    load(CAROL)
    code, report = _run(["--index", str(CAROL), "--queries", str(gold_file), "--engines",
                         "local,basic,router,keyword-router", "--grade"], tmp_path / "out")
    assert code == 0, report["failures"]
    assert "needs a real model" in report["grading"]["note"] and not report["grading"]["judge"]
    quality = report["quality"]
    assert set(quality["per_target"]) == {"local", "basic", "router", "keyword-router"}
    local = quality["per_target"]["local"]
    assert local["graded"] == 2 and 0 <= local["f1"] <= 1 and local["citation_validity"] == 1.0
    assert local["quality_measure"] == "token F1" and local["quality_per_dollar"] > 0
    assert set(quality["per_type"]["local"]) == {"Fact Retrieval", "Contextual Summarize"}
    assert set(quality["versus"]["router"]) == {"local", "basic"}
    assert set(quality["versus"]["keyword-router"]) == {"local", "basic", "router"}
    assert report["keyword_router"]["route_mix"] and report["keyword_router"]["quality"]["n"] == 2
    assert report["summary"]["local"]["latency_p99_s"] >= report["summary"]["local"]["latency_p95_s"]
    row = next(r for r in report["rows"] if r["engine"] == "keyword-router" and r["query_id"] == "a2")
    assert row["route"] == "global" and row["tried"] == ["global"]  # "main" is a global word of the keyword rules
    assert "_judge_input" not in row and "judge" not in row["grade"]
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Answer quality" in md and "## Keyword router (baseline: the keyword rules of the enterprise GraphRAG guide)" in md and "p99 s" in md


def test_route_bench_judges_through_the_loopback_server(gold_file: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.bench_mock import OfflineResponder
    from testing.model_server import LoopbackServer

    load(CAROL)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GRAPHROUTE_CHAT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    with LoopbackServer(default_reply=OfflineResponder()) as server:
        script(server, "judge_answer", '{"verdict": "correct", "reason": "same person"}')
        script(server, "judge_faithfulness", '{"sentences": [{"id": 1, "supported": true}]}')
        script(server, "judge_context", '{"evidence_found": [1], "relevant_records": [1]}')
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        cfg = tmp_path / "graphroute.toml"
        cfg.write_text('[models.embedding]\nprovider = "offline"\n', encoding="utf-8")
        code, report = _run(["--index", str(CAROL), "--queries", str(gold_file), "--engines", "local", "--grade",
                             "--model", "openai", "--config", str(cfg)], tmp_path / "out")
        answer_calls = len(requests_for(server, "local_answer"))
        judge_calls = sum(len(requests_for(server, t)) for t in ("judge_answer", "judge_faithfulness", "judge_context"))
    assert code == 0, report["failures"]
    assert report["grading"]["judge"] and report["consistency"]["problems"] == []
    local = report["quality"]["per_target"]["local"]
    assert local["judged"] == 2 and local["judge_score"] == 1.0 and local["verdicts"]["correct"] == 2
    assert local["quality_measure"] == "judge score" and local["judge_faithfulness"] is not None
    assert local["judge_context_recall"] == 0.75  # mean of 1/2 (two evidence claims, one found) and 1/1
    # Judge calls are reported on their own, never in the engine's calls.
    assert sum(r["llm_calls"] for r in report["rows"]) == answer_calls == 2
    assert local["judge_calls"] == judge_calls >= 4
