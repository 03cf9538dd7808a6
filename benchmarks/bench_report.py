"""Render a benchmark report: the terminal table (rich), `report.md` and `report.json`.

The same string tables feed the terminal and the markdown, so both always show the same figures.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

SUMMARY_HEADERS = (
    "engine", "runs", "failed", "degraded", "p50 s", "p95 s", "p99 s", "calls/q", "prompt tok/q", "output tok/q",
    "$/query", "$ total", "cache hits",
)


def _num(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:,.{digits}f}"


def _usd(value: float | None) -> str:
    if value is None:
        return "–"
    return f"${value:.6f}" if value < 0.01 else f"${value:,.4f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f} %"


def summary_rows(report: dict[str, Any]) -> list[list[str]]:
    out = []
    for engine, s in report["summary"].items():
        out.append([
            engine, str(s["runs"]), str(s["failures"]), str(s["degraded"]),
            _num(s["latency_p50_s"]), _num(s["latency_p95_s"]), _num(s.get("latency_p99_s")),
            _num(s["llm_calls_mean"], 1),
            _num(s["prompt_tokens_mean"], 0), _num(s["output_tokens_mean"], 0), _usd(s["cost_mean"]),
            _usd(s["cost_total"]), str(s["cached_calls_total"]),
        ])
    return out


def savings_rows(router: dict[str, Any]) -> list[list[str]]:
    rows = []
    for base, s in router["savings"].items():
        if s is None:
            rows.append([f"always {base}", "not run", "", "", "", ""])
            continue
        rows.append([
            f"always {base}", str(s["pairs"]),
            f"{_usd(s['router_cost'])} vs {_usd(s['baseline_cost'])}", _pct(s["cost_saving_frac"]),
            f"{_num(s['router_seconds'])} s vs {_num(s['baseline_seconds'])} s", _pct(s["time_saving_frac"]),
        ])
    return rows


SAVINGS_HEADERS = ("router vs", "queries", "cost (router vs baseline)", "cost saved", "time (sum)", "time saved")


def confusion_rows(quality: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    classes = quality["classes"]
    headers = ["label \\ routed", *classes, "recall"]
    rows = [[t, *(str(quality["confusion"][t][p]) for p in classes),
             _num(quality["per_class"][t]["recall"])] for t in classes]
    return headers, rows


def markdown_table(headers: list[str] | tuple[str, ...], rows: list[list[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


QUALITY_HEADERS = ("engine", "graded", "quality", "F1", "answer recall", "evidence recall", "citations valid",
                   "judge score", "correct/partial/wrong", "faithfulness", "ctx precision", "ctx recall",
                   "$/query", "p50 s", "quality per $", "judge calls", "judge $")


def _frac(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def quality_rows(quality: dict[str, Any]) -> list[list[str]]:
    out = []
    for engine, q in quality["per_target"].items():
        v = q["verdicts"]
        out.append([
            engine, str(q["graded"]), _frac(q["quality"]), _frac(q["f1"]), _frac(q["answer_recall"]),
            _frac(q["evidence_recall"]), _frac(q["citation_validity"]), _frac(q["judge_score"]),
            f"{v['correct']}/{v['partially']}/{v['incorrect']}" if q["judged"] else "–",
            _frac(q["judge_faithfulness"]), _frac(q["judge_context_precision"]), _frac(q["judge_context_recall"]),
            _usd(q["cost_mean"]), _num(q["latency_p50_s"]), _num(q["quality_per_dollar"], 1),
            str(q["judge_calls"]) if q["judged"] else "–", _usd(q["judge_cost"]) if q["judged"] else "–",
        ])
    return out


def quality_type_table(quality: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headline quality per engine (rows) and question type (columns)."""
    types = quality["types"]
    headers = ["engine", *types]
    rows = [[engine, *(_frac(per[t]["quality"]) for t in types)] for engine, per in quality["per_type"].items()]
    return headers, rows


VERSUS_HEADERS = ("router", "vs always", "questions", "quality (router vs always)", "$/query (router vs always)",
                  "p50 s (router vs always)")


def versus_rows(quality: dict[str, Any]) -> list[list[str]]:
    out = []
    for router, baselines in quality["versus"].items():
        for base, v in baselines.items():
            if v is None:
                continue
            out.append([router, base, str(v["pairs"]), f"{_frac(v['quality'])} vs {_frac(v['baseline_quality'])}",
                        f"{_usd(v['cost_mean'])} vs {_usd(v['baseline_cost_mean'])}",
                        f"{_num(v['latency_p50_s'])} vs {_num(v['baseline_latency_p50_s'])}"])
    return out


def quality_lines(report: dict[str, Any]) -> list[str]:
    grading = report.get("grading") or {}
    quality = report.get("quality")
    lines = []
    if grading.get("note"):
        lines.append(grading["note"])
    if quality:
        measure = next(iter(quality["per_target"].values()))["quality_measure"]
        lines.append(f"quality = {measure} per question (a failed run counts 0); quality per $ = summed quality "
                     "/ $ spent answering (answers-worth per dollar); judge calls and $ are not in the engines' "
                     "cost")
    return lines


def router_lines(router: dict[str, Any]) -> list[str]:
    """Headline figures of the router in plain sentences (used by the terminal and the markdown)."""
    if not router["route_mix"]:
        return ["every router run failed (see the failures table)"]
    lines = [
        "route mix: " + ", ".join(f"{k} {v}" for k, v in router["route_mix"].items())
        + "; engine used: " + ", ".join(f"{k} {v}" for k, v in router["engine_used_mix"].items())
        + f"; escalations: {router['escalations']}",
    ]
    calls = router.get("expected_calls")
    if calls:
        lines.append("model calls per question: " + ", ".join(
            f"{k.replace('_', ' ')} {_num(v, 2)}" for k, v in calls.items() if v is not None))
    q = router.get("quality")
    if q and q.get("n"):
        lines.append(f"routing accuracy {_num(q['accuracy'], 3)} ({q['correct']}/{q['n']}), "
                     f"macro-F1 {_num(q['macro_f1'], 3)}")
        cpc = router.get("cost_per_correct_route")
        lines.append(f"cost per correct route: {_usd(cpc)} (router cost on labelled queries / correct routes)")
    else:
        lines.append("no labels in the query set: accuracy and macro-F1 not computed")
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    model = report["model"]
    pricing = report["pricing"]
    parts = [
        "# route-bench report",
        "",
        f"- index: `{cfg['index']}` ({_index_line(report['index'])})",
        f"- queries: `{cfg['queries']}` — {report['queries']['count']} questions, "
        f"{report['queries']['labelled']} labelled; repeat {cfg['repeat']}, concurrency {cfg['concurrency']}, "
        f"seed {cfg['seed']}",
        f"- model: `{model['spec']}` — {model['description']}",
        *([f"- mock server: {_mock_line(model['mock_server'])}"] if model.get("mock_server") else []),
        f"- cost: {_pricing_line(pricing)}",
        f"- latency = wall-clock seconds per question as the caller sees it; p50/p95/p99 over "
        f"{cfg['repeat']} × {report['queries']['count']} runs per engine",
        f"- graphroute {report['packages'].get('graphroute', '?')}, Python {report['python']}, "
        f"{report['created_utc']}; {_machine_line(report.get('machine'))}",
        "",
        "## Per engine",
        "",
        markdown_table(SUMMARY_HEADERS, summary_rows(report)),
        "",
    ]
    quality = report.get("quality")
    if quality or report.get("grading"):
        parts += ["## Answer quality", ""] + [f"- {line}" for line in quality_lines(report)] + [""]
    if quality:
        parts += [markdown_table(QUALITY_HEADERS, quality_rows(quality)), ""]
        if quality["types"]:
            headers, rows = quality_type_table(quality)
            parts += ["Quality per question type:", "", markdown_table(headers, rows), ""]
        if versus_rows(quality):
            parts += ["Routers against always using one engine (same questions):", "",
                      markdown_table(VERSUS_HEADERS, versus_rows(quality)), ""]
    for key, title in (("router", "Router"), ("keyword_router", "Keyword router (baseline: the keyword rules of the enterprise GraphRAG guide)")):
        router = report.get(key)
        if not router:
            continue
        parts += [f"## {title}", ""] + [f"- {line}" for line in router_lines(router)] + [""]
        parts += [markdown_table(SAVINGS_HEADERS, savings_rows(router)), ""]
        q = router.get("quality")
        if q and q.get("n"):
            headers, rows = confusion_rows(q)
            parts += ["Confusion matrix (rows: label, columns: routed engine):", "",
                      markdown_table(headers, rows), ""]
    cons = report["consistency"]
    parts += ["## Consistency", "",
              f"{cons['checked_rows']} rows checked (totals = sum of stages; router calls = engines run alone "
              f"+ router stages): {len(cons['problems'])} problem(s).", ""]
    if cons["problems"]:
        parts += [markdown_table(("engine", "query", "repeat", "check", "expected", "actual"),
                                 [[p["engine"], p["query_id"], str(p["repeat"]), p["check"], str(p["expected"]),
                                   str(p["actual"])] for p in cons["problems"]]), ""]
    if report["failures"]:
        parts += ["## Failures", "", markdown_table(
            ("engine", "query", "repeat", "error"),
            [[f["engine"], f["query_id"], str(f["repeat"]), f["error"][:200]] for f in report["failures"]]), ""]
    if report.get("charts"):
        parts += ["## Charts", ""] + [f"![{Path(c).stem}]({c})" for c in report["charts"]] + [""]
    return "\n".join(parts)


def _mock_line(m: dict[str, Any]) -> str:
    line = (f"{m['chat_requests']} chat requests while measuring (max {m['max_in_flight']} in flight, "
            f"{m['failed_requests']} failed, {m['replies_computed_while_measuring']} replies not precomputed)")
    warm = m.get("warmup")
    if warm:
        line += (f"; warm-up pass: {warm['runs']} runs, {warm['llm_calls']} calls, {warm['failed']} failed, "
                 f"{warm['degraded']} degraded")
    return line


def _machine_line(machine: dict[str, Any] | None) -> str:
    if not machine:
        return "machine load not recorded"
    return (f"{machine['cpus']} CPUs, 1-minute load average {machine['load_average_1m_before']} before / "
            f"{machine['load_average_1m_after']} after the run")


def _index_line(index: dict[str, Any]) -> str:
    return ", ".join(f"{v} {k}" for k, v in index.items() if isinstance(v, int))


def _pricing_line(pricing: dict[str, Any]) -> str:
    if pricing["mode"] == "reported":
        return "as reported by the model layer (provider token counts × the price table)"
    chat = pricing.get("chat_usd_per_1m") or {}
    emb = pricing.get("embedding_usd_per_1m") or {}
    return (f"calls priced as if served by `{pricing['chat_model']}` (${chat.get('input', 0):g} in / "
            f"${chat.get('output', 0):g} out per 1M tokens) and embeddings as `{pricing['embedding_model']}` "
            f"(${emb.get('input', 0):g} per 1M)"
            + ("; the mock endpoint is named after that model, so the model layer priced each call itself "
               "(model-cache hits free)" if pricing.get("chat_cost_from_model_layer") else ""))


def print_terminal(report: dict[str, Any], console: Any | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    # Not a terminal (pipe, CI log): rich would wrap at 80 columns and truncate every header.
    console = console or Console(width=None if sys.stdout.isatty() else 170)
    table = Table(title=f"route-bench — {report['model']['spec']} — {report['queries']['count']} questions "
                        f"× {report['config']['repeat']}")
    for i, h in enumerate(SUMMARY_HEADERS):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in summary_rows(report):
        table.add_row(*row)
    console.print(table)
    quality = report.get("quality")
    for line in quality_lines(report):
        console.print(f"[bold]quality[/bold] {line}")
    if quality:
        qt = Table(title="answer quality")
        for i, h in enumerate(QUALITY_HEADERS):
            qt.add_column(h, justify="left" if i == 0 else "right")
        for row in quality_rows(quality):
            qt.add_row(*row)
        console.print(qt)
    for key in ("router", "keyword_router"):
        router = report.get(key)
        if not router:
            continue
        name = key.replace("_", "-")
        for line in router_lines(router):
            console.print(f"[bold]{name}[/bold] {line}")
        sav = Table(title=f"{name} savings")
        for h in SAVINGS_HEADERS:
            sav.add_column(h)
        for row in savings_rows(router):
            sav.add_row(*row)
        console.print(sav)
    problems = report["consistency"]["problems"]
    failures = report["failures"]
    if problems or failures:
        console.print(f"[red]{len(failures)} failed run(s), {len(problems)} consistency problem(s) "
                      "— see report.md[/red]")


def write_json(report: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
