"""Unit tests of route-bench's parts: query loading, statistics, the mock backend's task detection,
consistency checks and argument errors (the end-to-end runs are in test_route_bench_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixture_paths import CAROL

from benchmarks import route_bench
from benchmarks.bench_mock import TASK_SCHEMAS, detect_task, parse_model_spec
from benchmarks.bench_queries import BenchInputError, load_queries
from benchmarks.bench_runner import check_router_rows, check_row
from benchmarks.bench_stats import percentile, router_savings, routing_quality, summarize_engine
from engines import prompts

# ---- queries --------------------------------------------------------------------------------------


def test_text_queries_skip_blanks_and_comments(tmp_path: Path) -> None:
    f = tmp_path / "q.txt"
    f.write_text("Who is Scrooge?\n\n# skipped\nWhat are the themes?\n", encoding="utf-8")
    qs = load_queries(str(f))
    assert [(q.id, q.question, q.label) for q in qs] == [("q1", "Who is Scrooge?", None),
                                                          ("q4", "What are the themes?", None)]


def test_csv_and_jsonl_read_ids_and_labels(tmp_path: Path) -> None:
    c = tmp_path / "q.csv"
    c.write_text("id,question,label\na,Who is Marley?,local\nb,Main themes?,GLOBAL\n", encoding="utf-8")
    assert [(q.id, q.label) for q in load_queries(str(c))] == [("a", "local"), ("b", "global")]
    j = tmp_path / "q.jsonl"
    j.write_text(json.dumps({"question": "Why?", "label": "drift"}) + "\n", encoding="utf-8")
    assert load_queries(str(j))[0].label == "drift"


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ('{"question": "x", "label": "vector"}\n', ".jsonl", "not an engine"),
        ("{not json\n", ".jsonl", "not valid JSON"),
        ("id,text2\n1,x\n", ".csv", "needs a 'question' column"),
        ('{"id": "a", "question": "x"}\n{"id": "a", "question": "y"}\n', ".jsonl", "duplicate query id"),
        ("\n# only a comment\n", ".txt", "holds no questions"),
    ],
)
def test_bad_query_files_name_the_problem(tmp_path: Path, content: str, suffix: str, message: str) -> None:
    f = tmp_path / f"q{suffix}"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(BenchInputError, match=message):
        load_queries(str(f))


def test_builtin_christmas_carol_set_is_labelled_and_balanced() -> None:
    qs = load_queries("builtin:christmas_carol")
    assert len(qs) >= 30
    labels = {q.label for q in qs}
    assert labels == {"local", "global", "drift"}
    assert min(sum(q.label == lab for q in qs) for lab in labels) >= 8
    with pytest.raises(BenchInputError, match="unknown built-in"):
        load_queries("builtin:nope")


# ---- stats ----------------------------------------------------------------------------------------


def test_percentile_interpolates_like_numpy() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0], 95) == 10.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    assert percentile([], 50) is None


def test_routing_quality_macro_f1_by_hand() -> None:
    pairs = [("local", "local"), ("local", "global"), ("global", "global"), ("drift", "local")]
    q = routing_quality(pairs)
    assert q["accuracy"] == 0.5
    # local: P=1/2 R=1/2 F1=.5; global: P=1/2 R=1 F1=2/3; drift: 0  -> macro (0.5+0.6667+0)/3
    assert q["macro_f1"] == pytest.approx((0.5 + 2 / 3 + 0) / 3)
    assert q["confusion"]["drift"]["local"] == 1


def _row(engine: str, qid: str, cost: float, seconds: float, calls: int, **extra: object) -> dict:
    return {"engine": engine, "query_id": qid, "repeat": 0, "ok": True, "cost": cost, "seconds": seconds,
            "llm_calls": calls, **extra}


def test_router_savings_against_a_baseline() -> None:
    rows = [_row("router", "a", 1.0, 1.0, 2), _row("router", "b", 1.0, 1.0, 2),
            _row("global", "a", 4.0, 2.0, 8), _row("global", "b", 4.0, 2.0, 8)]
    s = router_savings(rows, "global")
    assert s is not None
    assert s["cost_saving_frac"] == pytest.approx(0.75)
    assert s["time_saving_frac"] == pytest.approx(0.5)
    assert router_savings(rows, "drift") is None


def test_expected_calls_compare_the_router_with_fixed_engines_and_the_oracle() -> None:
    from benchmarks.bench_stats import expected_calls

    rows = [_row("local", q, 0.0, 1.0, 1, label="") for q in "ab"]
    rows += [_row("drift", q, 0.0, 1.0, 21, label="") for q in "ab"]
    rows += [_row("router", "a", 0.0, 1.0, 1, label="local", tried=["local"], usage=_usage({"answer": 1})),
             _row("router", "b", 0.0, 1.0, 23, label="drift", tried=["local", "drift"],
                  usage=_usage({"classify": 1, "answer": 1, "followups": 21}))]
    for r in rows:
        r["label"] = {"a": "local", "b": "drift"}[r["query_id"]]
    calls = expected_calls(rows)
    assert calls["router_after_escalation"] == 12 and calls["router_first_engine"] == 1
    assert calls["router_second_opinion"] == 0.5
    assert calls["always_local"] == 1 and calls["always_drift"] == 21 and calls["oracle"] == 11
    rows[-1]["alt"] = "local"  # local is also right for b: the oracle takes the cheaper right engine
    assert expected_calls(rows)["oracle"] == 1


def test_each_repeat_keeps_its_own_latency_median() -> None:
    fields = {"degraded": False, "prompt_tokens": 0, "output_tokens": 0, "cached_calls": 0}
    rows = [dict(_row("local", q, 0.0, s, 1, **fields), repeat=k)
            for k, times in enumerate(([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])) for q, s in zip("abc", times, strict=True)]
    summary = summarize_engine(rows)
    assert summary["latency_p50_by_repeat_s"] == [2.0, 5.0]
    assert summary["latency_p50_s"] == pytest.approx(3.5)


# ---- consistency ----------------------------------------------------------------------------------


def _usage(stages: dict[str, int]) -> dict:
    fields = ("llm_calls", "prompt_tokens", "output_tokens", "cached_calls", "embedding_calls", "embedding_tokens")
    st = {k: {f: (v if f == "llm_calls" else 0) for f in fields} | {"cost": 0.0, "cost_reported": 0.0}
          for k, v in stages.items()}
    total = {f: sum(s[f] for s in st.values()) for f in (*fields, "cost", "cost_reported")}
    return {"stages": st, "total": total}


def test_check_row_flags_a_total_that_is_not_the_sum() -> None:
    usage = _usage({"map": 3, "reduce": 1})
    good = _row("global", "a", 0.0, 1.0, 4, usage=usage)
    assert check_row(good) == []
    usage["total"]["llm_calls"] = 5
    bad = check_row(_row("global", "a", 0.0, 1.0, 5, usage=usage))
    assert [p["check"] for p in bad] == ["total llm_calls != sum of stages"]


def test_router_calls_checked_against_the_engine_run_alone() -> None:
    local = _row("local", "a", 0.0, 1.0, 1, usage=_usage({"answer": 1}))
    router = _row("router", "a", 0.0, 1.0, 2, usage=_usage({"classify": 1, "answer": 1}), tried=["local"])
    assert check_router_rows([local, router]) == []
    local_more = dict(local, llm_calls=2)
    problems = check_router_rows([local_more, router])
    assert len(problems) == 1 and "run alone" in problems[0]["check"]
    assert problems[0]["expected"] == 3 and problems[0]["actual"] == 2


# ---- mock backend ---------------------------------------------------------------------------------


def test_model_spec_parsing() -> None:
    assert parse_model_spec("mock:300").latency_ms == 300
    spec = parse_model_spec("mock:50:80")
    assert (spec.kind, spec.latency_ms, spec.tokens_per_s, spec.label) == ("mock", 50, 80, "mock:50:80")
    assert parse_model_spec("offline").kind == "offline"
    for bad in ("mock", "mock:abc", "gpt-4", "mock:10:0"):
        with pytest.raises(BenchInputError):
            parse_model_spec(bad)


def _body(system: str, user: str = "Who is Scrooge?", fmt: dict | None = None) -> dict:
    body: dict = {"model": "gpt-4.1-mini", "messages": [{"role": "system", "content": system},
                                                        {"role": "user", "content": user}]}
    if fmt is not None:
        body["response_format"] = fmt
    return body


TABLE = "-----Reports-----\nid|title|content\n1|A|B\n"


@pytest.mark.parametrize(
    ("system", "task"),
    [
        (prompts.LOCAL_ANSWER.format(citation_rules="", response_type="x", context_data=TABLE), "local_answer"),
        (prompts.BASIC_ANSWER.format(response_type="x", context_data="-----Sources-----\nid|text\n1|t\n"),
         "basic_answer"),
        (prompts.GLOBAL_MAP.format(max_length=100, context_data=TABLE), "global_map"),
        (prompts.GLOBAL_REDUCE.format(max_length=100, general_knowledge="", response_type="x",
                                      report_data=prompts.analyst_block(1, 80, "p")), "global_reduce"),
        (prompts.RATE.format(context_data=TABLE), "rate"),
        (prompts.DRIFT_HYDE.format(template="# T"), "drift_hyde"),
        (prompts.DRIFT_PRIMER.format(context_data=TABLE), "drift_primer"),
        (prompts.DRIFT_FOLLOWUP.format(global_query="q", k_followups=3, context_data=TABLE), "drift_followup"),
        (prompts.DRIFT_REDUCE.format(response_type="x", report_data=prompts.analyst_block(1, 80, "p")),
         "drift_reduce"),
        (prompts.QUESTIONS.format(question_count=3, context_data=TABLE), "questions"),
    ],
)
def test_detect_task_from_each_engine_prompt(system: str, task: str) -> None:
    assert detect_task(_body(system)) == task


def test_detect_task_for_router_prompts() -> None:
    from router.classifier import ROUTE_SYSTEM_PROMPT
    from router.rewrite import REWRITE_SYSTEM, render_history

    assert detect_task(_body(ROUTE_SYSTEM_PROMPT)) == "route"
    history = render_history([{"role": "user", "content": "Who is Scrooge?"}])
    assert detect_task(_body(REWRITE_SYSTEM.format(history=history), user="and his clerk?")) == "rewrite"


def test_offline_responder_replies_validate_for_every_json_task() -> None:
    from benchmarks.bench_mock import OfflineResponder

    responder = OfflineResponder()
    table = ("-----Reports-----\nid|title|content|rank\n7|Scrooge|Scrooge is a miser who employs Bob Cratchit. "
             "He changes after three spirits visit him.|5\n")
    for system in (prompts.GLOBAL_MAP.format(max_length=100, context_data=table),
                   prompts.RATE.format(context_data=table),
                   prompts.DRIFT_PRIMER.format(context_data=table),
                   prompts.DRIFT_FOLLOWUP.format(global_query="Who is Scrooge?", k_followups=3, context_data=table),
                   prompts.QUESTIONS.format(question_count=3, context_data=table)):
        task = detect_task(_body(system))
        reply = responder(_body(system))
        TASK_SCHEMAS[task].model_validate(json.loads(reply))
    assert responder.invalid == {}
    assert sum(responder.tasks.values()) == 5


def test_detect_task_prefers_the_json_schema_name() -> None:
    for task, schema in TASK_SCHEMAS.items():
        fmt = {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": {}}}
        assert detect_task(_body("anything", fmt=fmt)) == task


# ---- argument errors: message + exit code 2, never a traceback ---------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--index", "/nonexistent/idx", "--queries", "builtin:christmas_carol"], "index path not found"),
        (["--index", str(CAROL), "--queries", "/nonexistent/q.txt"], "queries file not found"),
        (["--index", str(CAROL), "--queries", "builtin:christmas_carol", "--engines", "local,vector"],
         "unknown engine 'vector'"),
        (["--index", str(CAROL), "--queries", "builtin:christmas_carol", "--model", "mock:fast"],
         "is not understood"),
        (["--index", str(CAROL), "--queries", "builtin:christmas_carol", "--repeat", "0"], "must be >= 1"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    assert route_bench.main([*argv, "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_unreadable_index_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty_index"
    empty.mkdir()
    code = route_bench.main(["--index", str(empty), "--queries", "builtin:christmas_carol", "--limit", "1",
                             "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    assert "cannot load index" in capsys.readouterr().err


# ---- stratified --limit, label maps, parquet gold files, chart labels -------------------------


def _labelled(tmp_path: Path) -> Path:
    rows = [{"id": f"l{i}", "question": f"local question {i}", "label": "local"} for i in range(12)]
    rows += [{"id": f"g{i}", "question": f"global question {i}", "label": "global"} for i in range(6)]
    rows += [{"id": f"d{i}", "question": f"drift question {i}", "label": "drift"} for i in range(2)]
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


def test_limit_samples_across_labels_and_is_seeded(tmp_path: Path) -> None:
    from benchmarks.bench_queries import load_queries

    path = _labelled(tmp_path)
    sample = load_queries(str(path), limit=5, seed=1)
    labels = [q.label for q in sample]
    assert len(sample) == 5 and set(labels) == {"local", "global", "drift"}  # not the first five (all local)
    assert labels.count("local") >= labels.count("global") >= labels.count("drift")
    assert sample == load_queries(str(path), limit=5, seed=1)
    assert [q.id for q in sample] != [q.id for q in load_queries(str(path), limit=5, seed=2)]
    assert len(load_queries(str(path), limit=50)) == 20


def test_parquet_gold_file_with_a_label_map(tmp_path: Path) -> None:
    import pandas as pd

    from benchmarks.bench_queries import LabelMap, load_queries

    pd.DataFrame({
        "id": ["x1", "x2", "x2", "x3"], "question": ["Who is A?", "Summarise B", "Why C?", "Write a poem"],
        "answer": ["A", "B", "C", "D"], "question_type": ["Fact Retrieval", "Contextual Summarize",
                                                          "Complex Reasoning", "Creative Generation"],
        "evidence": ["A is a; A is b", "", None, "d"],
    }).to_parquet(tmp_path / "q.parquet")
    (tmp_path / "map.json").write_text(json.dumps({"field": "question_type", "map": {
        "Fact Retrieval": "local", "Contextual Summarize": "global", "Complex Reasoning": "drift",
        "Creative Generation": "exclude"}}), encoding="utf-8")
    queries = load_queries(str(tmp_path / "q.parquet"), label_map=LabelMap.load(str(tmp_path / "map.json")))
    assert [(q.id, q.label) for q in queries] == [("x1", "local"), ("x2", "global"), ("x2#2", "drift")]
    assert queries[0].evidence == ("A is a", "A is b") and queries[1].evidence == () and queries[0].answer == "A"
    (tmp_path / "bad.json").write_text(json.dumps({"field": "t", "map": {"a": "fast"}}), encoding="utf-8")
    with pytest.raises(BenchInputError, match="'fast' is not an engine"):
        LabelMap.load(str(tmp_path / "bad.json"))


def test_the_alt_reading_is_no_routing_error(tmp_path: Path) -> None:
    from benchmarks.bench_queries import LabelMap
    from benchmarks.bench_stats import router_section

    (tmp_path / "map.json").write_text(json.dumps({"field": "question_type", "map": {"Reasoning": "drift"},
                                                   "alt": {"Reasoning": "local"}}), encoding="utf-8")
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": "Why did A leave?", "question_type": "Reasoning"})
                                      + "\n", encoding="utf-8")
    [query] = load_queries(str(tmp_path / "q.jsonl"), label_map=LabelMap.load(str(tmp_path / "map.json")))
    assert (query.label, query.alt) == ("drift", "local")
    rows = [_row("router", "a", 0.0, 1.0, 1, label="drift", alt=alt, route=route, engine_used=route, tried=[route],
                 usage=_usage({"answer": 1})) for alt, route in (("local", "local"),)]
    rows += [_row("router", "b", 0.0, 1.0, 21, label="drift", alt=None, route="local", engine_used="local",
                  tried=["local"], usage=_usage({"answer": 1}))]
    section = router_section(rows)
    assert section is not None and section["quality"]["correct"] == 1 and section["quality"]["n"] == 2


def test_grade_without_gold_answers_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "q.txt"
    path.write_text("Who is Scrooge?\n", encoding="utf-8")
    code = route_bench.main(["--index", str(tmp_path), "--queries", str(path), "--grade"])
    assert code == 2 and "--grade needs gold answers" in capsys.readouterr().err


def test_keyword_router_is_a_known_engine() -> None:
    assert route_bench.parse_engines("router,keyword-router") == ["router", "keyword-router"]


def test_chart_labels_of_nearby_points_do_not_share_a_spot() -> None:
    from benchmarks.bench_charts import label_offsets

    offsets = label_offsets([("local", 0.39, 5.0), ("basic", 0.40, 5.1), ("global", 1.2, 67.0)])
    assert offsets["local"] != offsets["basic"] and offsets["global"] == (6, 6)


def test_redacted_report_keeps_figures_and_ids_but_no_question_text() -> None:
    from benchmarks.redact_report import redact

    report = {"queries": {"spec": "/data/bench/q.parquet", "count": 1},
              "rows": [{"engine": "local", "query_id": "Novel-1", "question": "Who met whom?",
                        "response_preview": "A quoted excerpt", "cost": 0.5, "grade": {"f1": 0.2}}]}
    out = redact(report, "/data")
    assert out["rows"] == [{"engine": "local", "query_id": "Novel-1", "cost": 0.5, "grade": {"f1": 0.2}}]
    assert out["queries"]["spec"] == "../shared/data/bench/q.parquet" and "redacted" in out
    assert report["rows"][0]["question"] == "Who met whom?"  # the run's own report is left as it was


def test_redacted_copy_shows_data_paths_relative_in_json_and_markdown(tmp_path: Path) -> None:
    from benchmarks.redact_report import main

    data = tmp_path / "shared" / "data"
    (data / "bench").mkdir(parents=True)
    alias = tmp_path / "alias"  # the same folder by another name (a symlinked data folder)
    alias.symlink_to(tmp_path / "shared")
    run, dest = tmp_path / "run", tmp_path / "results" / "copy"
    run.mkdir()
    config = {"queries": f"{data}/bench/q.parquet", "label_map": f"{alias}/data/bench/map.json",
              "index": "/tmp/idx", "near_miss": f"{data}base/x", "root": str(data)}
    (run / "report.json").write_text(json.dumps({"config": config, "rows": [{"query_id": "q1", "question": "Q?"}]}))
    (run / "report.md").write_text(f"- queries: `{data}/bench/q.parquet` — 1 question\n")
    (run / "chart.png").write_bytes(b"png")

    assert main([str(run), str(dest), "--data-root", str(alias / "data")]) == 0
    copied = json.loads((dest / "report.json").read_text())["config"]
    assert copied == {"queries": "../shared/data/bench/q.parquet", "label_map": "../shared/data/bench/map.json",
                      "index": "/tmp/idx", "near_miss": f"{data}base/x", "root": "../shared/data"}
    assert (dest / "report.md").read_text() == "- queries: `../shared/data/bench/q.parquet` — 1 question\n"
    assert (dest / "chart.png").read_bytes() == b"png"
    assert "question" not in (dest / "report.json").read_text()


def test_redact_in_place_rewrites_committed_copies_whose_run_is_gone(tmp_path: Path) -> None:
    from benchmarks.redact_report import main

    data = tmp_path / "data"
    data.mkdir()
    only_md, with_json = tmp_path / "carol", tmp_path / "novel"
    only_md.mkdir()
    with_json.mkdir()
    (only_md / "report.md").write_text(f"- index: `{data}/carol_index` (529 entities)\n")
    (with_json / "report.json").write_text(json.dumps({"config": {"queries": f"{data}/q.parquet"}, "rows": []}))
    (with_json / "scale.json").write_text(json.dumps([{"index": f"{data}/big"}]))

    assert main(["--in-place", str(only_md), str(with_json), "--data-root", str(data)]) == 0
    assert (only_md / "report.md").read_text() == "- index: `../shared/data/carol_index` (529 entities)\n"
    report = json.loads((with_json / "report.json").read_text())
    assert report["config"]["queries"] == "../shared/data/q.parquet" and "redacted" in report
    assert json.loads((with_json / "scale.json").read_text()) == [{"index": "../shared/data/big"}]
    assert main(["--in-place", str(with_json), "--data-root", str(data)]) == 0  # idempotent
    assert json.loads((with_json / "report.json").read_text()) == report


def test_committed_reports_carry_no_absolute_data_path() -> None:
    # every committed report names the data as ../shared/data/..., never this machine's absolute folder
    import re

    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    absolute = []
    for path in sorted(results.rglob("*")):
        if path.suffix in (".json", ".md"):
            for found in re.findall(r"[^\s`'\"(]*/shared/data\b", path.read_text(encoding="utf-8")):
                if not found.startswith("../shared/data"):
                    absolute.append(f"{path.relative_to(results)}: {found}")
    assert not absolute, absolute
