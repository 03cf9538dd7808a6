"""Write `docs/benchmarks.md` and the figures table of `README.md` from the committed result files.

    python -m tools.docs.benchmarks_page            # rewrite both
    python -m tools.docs.benchmarks_page --check    # exit 1 when either is stale

Every figure on the page is read from a file under `benchmarks/results/` that its script wrote; each section
names the script's command, the date and the machine of that run. A result file that is missing leaves its
section out rather than showing an old figure.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.routing.calibration import UNTESTED_CEILING

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
README_START, README_END = "<!-- figures:start -->", "<!-- figures:end -->"

Json = dict[str, Any]


@dataclass(frozen=True)
class Headline:
    """One row of the README's figures table: what, the figure, and the section of the page it comes from."""

    what: str
    figure: str
    anchor: str


@dataclass(frozen=True)
class Section:
    anchor: str  # the heading's slug, which the README links to
    title: str
    path: str
    render: Callable[[Json], tuple[list[str], list[Headline]]]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _median_range(values: Sequence[float], digits: int = 2, unit: str = "") -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}{unit} (1 run)"
    return f"{med:.{digits}f}{unit} ({min(values):.{digits}f}–{max(values):.{digits}f}, {len(values)} runs)"


def _machine(report: Json) -> str:
    m = report.get("machine")
    if isinstance(m, str):
        return m
    if not isinstance(m, dict):
        return "not recorded"
    parts = [str(m[k]) for k in ("processor",) if m.get(k)]
    if m.get("cpus"):
        parts.append(f"{m['cpus']} cores")
    if m.get("memory_gib"):
        parts.append(f"{m['memory_gib']} GiB")
    for key in ("load_average_1m_before", "load_avg_1m"):
        if key in m:
            parts.append(f"load average {m[key]:.1f} at start")
    return ", ".join(parts) or "not recorded"


def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _provenance(report: Json, path: Path) -> list[str]:
    date = report.get("date") or report.get("created_utc") or "not recorded"
    command = report.get("command") or "not recorded"
    load = report.get("load_avg_start")
    machine = _machine(report) + (f", load average {load[0]:.1f} at start" if load else "")
    return [f"- Command: `{command}`", f"- Date: {date}", f"- Machine: {machine}",
            f"- Result file: `{_shown(path)}`", ""]


# ---- routing (benchmarks/router_eval.py) ---------------------------------------------------------------

def _eval_row(name: str, held_out: str, m: Json) -> str:
    recall = m.get("recall", {})
    return (f"| {name} | {held_out} | {m['n']} | {_f(m['macro_f1'])} | {_f(recall.get('global'))} | "
            f"{_f(recall.get('local'))} | {_f(recall.get('drift'))} | {_pct(m.get('confident_errors'))} |")


def routing(r: Json) -> tuple[list[str], list[Headline]]:
    lines = [
        "Every figure is on questions the model scoring them was not trained on. Confident errors: the share of",
        "all questions routed wrongly with confidence ≥ 0.9 (they reach neither the model's second opinion nor",
        "the local-first start).", "",
        "| set | what was held out | n | macro-F1 | global recall | local recall | DRIFT recall | confident errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    cv = r.get("grouped_cv", {}).get("all")
    if cv:
        lines.append(_eval_row("all labelled sets, 5-fold grouped CV", "each fold (a template's questions stay "
                               "together)", cv))
    for cues in ("with_cues", "without_cues"):
        for source, m in r.get("loso", {}).get(cues, {}).items():
            label = "cue lexicons kept" if cues == "with_cues" else "no cue lexicons"
            lines.append(_eval_row(f"{source}, leave one source out ({label})", f"all of {source}", m))
    heads = [Headline("Routing macro-F1, grouped cross-validation", _f(cv["macro_f1"]), "routing")] if cv else []
    loso = r.get("loso", {}).get("with_cues", {})
    if loso:
        worst = min(loso, key=lambda s: loso[s]["macro_f1"])
        heads.append(Headline("Routing macro-F1 with a whole source of questions held out (lowest source)",
                              f"{_f(loso[worst]['macro_f1'])} ({worst})", "routing"))
    for key, label in (("new_styles", "new-styles set 1 (looked at during development)"),
                       ("new_styles_2", "new-styles set 2 (only totals looked at)"),
                       ("new_styles_3", "new-styles set 3 (written last, only totals looked at)")):
        part = r.get(key)
        if isinstance(part, dict) and "all" in part:
            lines.append(_eval_row(label, "never trained on", part["all"]))
            if key == "new_styles_3":
                heads.append(Headline("Routing macro-F1, held-out new-styles set 3",
                                      _f(part["all"]["macro_f1"]), "routing"))
    wi = r.get("with_index", {})
    single: list[str] = []
    for set_key, set_label in (("index_eval", "podcast + earnings-call questions (per-question results seen)"),
                               ("index_eval_2", "podcast + earnings-call questions (totals only; its one error with the index was looked at)"),
                               ("index_eval_3", "podcast + earnings-call + novel questions written last (totals only, seen while choosing one rule)")):
        part = wi.get(set_key, {})
        for key, label in (("both_with_index", "with the offline indexes"), ("both_without_index", "wording only")):
            if key in part:
                lines.append(_eval_row(f"{set_label}, {label}", "never trained on", part[key]))
                one_doc = part[key].get("by_kind", {}).get("one_document", {})
                if one_doc:
                    single.append(f"{_f(one_doc['accuracy'])} {label} ({set_key}, n={one_doc['n']})")
        if "both_with_index" in part and set_key == "index_eval_3":
            heads.append(Headline("Global recall with an index (podcasts, earnings calls, novels; written last)",
                                  _f(part["both_with_index"]["recall"].get("global")), "routing"))
    lines.append("")
    if single:
        lines += ["Questions about one episode, call or book, routed to local search: " + "; ".join(single) + ".", ""]
    carol = r.get("carol", {})
    if carol:
        w = carol["with_index"]
        lines += [f"The {w['n']} labelled Christmas Carol questions of route-bench (no training question is about "
                  f"this book, though generic wordings such as a story's main themes are; their per-question results "
                  f"were seen during development): {w['right']}/{w['n']} routed as labelled with the index, "
                  f"{carol['without_index']['right']}/{carol['without_index']['n']} without.", ""]
    base = r.get("baselines", {})
    if base:
        lines += ["Keyword baselines (no training), on every labelled question:", "",
                  "| rules | n | macro-F1 | global recall | confident errors |", "|---|---|---|---|---|"]
        for name, m in base.items():
            m = m.get("all", m)
            lines.append(f"| {name} | {m['n']} | {_f(m['macro_f1'])} | {_f(m['recall'].get('global'))} | "
                         f"{_pct(m.get('confident_errors'))} |")
        lines.append("")
    lat = r.get("latency")
    if lat:
        lines += [f"Routing time per question (p50, median and range over runs): without an index "
                  f"{_median_range(lat['no_index_p50_ms'], 3, ' ms')}; with a "
                  f"{lat['index_entities']:,}-entity index {_median_range(lat['with_index_p50_ms'], 3, ' ms')}.", ""]
    return lines, heads


# ---- routing cost and calibration (benchmarks/router_eval.py --parts loso,carol) ------------------------

POLICIES = (("first_decision", "the classifier's engine"), ("after_commitment", "after the commitment rule, offline"),
            ("after_confirmation", "after the second opinion (its vote taken as the label: an upper bound)"),
            ("always_local", "always local"), ("always_drift", "always DRIFT"), ("oracle", "oracle (knows the label)"))


def routing_cost(r: Json) -> tuple[list[str], list[Headline]]:
    calls = r["engine_calls"]["calls"]
    lines = ["Leave-one-source-out: each source of labelled questions entirely held out of training, the model "
             "trained on the others (no index). A route the label map's `alt` reading also accepts counts as right "
             "(local for GraphRAG-Bench and MultiHop-RAG questions scoped to one book or a few named articles). "
             "The calibration maps' design (per range of confidence the lowest of a lower bound, the hardest held-out "
             "source testing the engine and a ceiling where none does; `tools/routing/calibration.py`) was chosen "
             "among a few variants looking at these figures, so they are not untouched.", "",
             "Accuracy of DRIFT and global decisions per confidence band:", "",
             "| held out | cue lexicons | " + " | ".join(b for b, _ in _BAND_HEADS) + " |",
             "|---|---|" + "---|" * len(_BAND_HEADS)]
    confident = {"n": 0, "right": 0.0}
    for cues, per in r["loso"].items():
        for source, m in per.items():
            bands = {b["band"]: b for b in m["expensive_reliability"]}
            cells = [f"{bands[k]['accuracy']:.2f} (n={bands[k]['n']})" if k in bands else "-" for _, k in _BAND_HEADS]
            lines.append(f"| {source} | {'kept' if cues == 'with_cues' else 'off'} | " + " | ".join(cells) + " |")
            if cues == "with_cues":
                for b in m["expensive_reliability"]:
                    if float(b["band"].split("-")[0]) >= 0.8:
                        confident["n"] += b["n"]
                        confident["right"] += b["n"] * b["accuracy"]
    by_engine = [(cues, source, m) for cues, per in r["loso"].items() for source, m in per.items()
                 if "reliability_by_engine" in m]
    if by_engine:
        lines += ["", "The same per engine (the calibration maps are fitted inside each fold, on the other sources "
                  "only):", "", "| held out | cue lexicons | engine | " + " | ".join(b for b, _ in _BAND_HEADS) + " |",
                  "|---|---|---|" + "---|" * len(_BAND_HEADS)]
        for cues, source, m in by_engine:
            for engine in ("drift", "global"):
                bands = {b["band"]: b for b in m["reliability_by_engine"].get(engine, [])}
                if bands:
                    cells = [f"{bands[k]['accuracy']:.2f} (n={bands[k]['n']})" if k in bands else "-"
                             for _, k in _BAND_HEADS]
                    lines.append(f"| {source} | {'kept' if cues == 'with_cues' else 'off'} | {engine} | "
                                 + " | ".join(cells) + " |")
    highest = [f"{source}: " + ", ".join(f"{e} {v['highest']:.2f}" for e, v in m["calibration_maps"].items())
               for source, m in r["loso"].get("with_cues", {}).items() if "calibration_maps" in m]
    if highest:
        lines += ["", "The highest confidence each engine's map can give, per held-out source (a range of confidence in "
                  "which no source held out of the fold's wording model has decisions of that engine, and so none "
                  f"tested it, claims at most {UNTESTED_CEILING}): " + "; ".join(highest) + "."]
    lines += ["", "Routing per held-out source (wrong: the share of all its questions routed wrongly at that "
              "confidence or above):", "",
              "| held out | cue lexicons | n | macro-F1 | global recall | local recall | DRIFT recall | wrong at ≥ 0.8 "
              "| wrong at ≥ 0.9 |", "|---|---|---|---|---|---|---|---|---|"]
    for cues, per in r["loso"].items():
        for source, m in per.items():
            recall = m.get("recall", {})
            lines.append(f"| {source} | {'kept' if cues == 'with_cues' else 'off'} | {m['n']} | {_f(m['macro_f1'])} | "
                         f"{_f(recall.get('global'))} | {_f(recall.get('local'))} | {_f(recall.get('drift'))} | "
                         f"{_pct(m.get('confident_errors_at_0.8'))} | {_pct(m.get('confident_errors'))} |")
    for cues, m in r.get("loso_pooled", {}).items():
        kept = "cue lexicons kept" if cues == "with_cues" else "no cue lexicons"
        lines += ["", f"Every held-out source together ({kept}; n={m['n']}): macro-F1 {_f(m['macro_f1'])}, global recall "
                  f"{_f(m['recall'].get('global'))}, wrong at confidence ≥ 0.8 {_pct(m.get('confident_errors_at_0.8'))}"
                  f" of all questions, wrong at ≥ 0.9 {_pct(m.get('confident_errors'))}."]
    lines += ["", f"Expected model calls per question and accuracy, by policy, from the decisions alone "
              f"(calls per engine: {', '.join(f'{e} {c:.1f}' for e, c in calls.items())}; "
              f"{r['engine_calls']['how']}). After the commitment rule, an expensive route below its threshold "
              "starts local and escalates exactly when local is not right:", "",
              "| held out (cue lexicons kept) | " + " | ".join(label for _, label in POLICIES) + " |",
              "|---|" + "---|" * len(POLICIES)]
    for source, m in r["loso"].get("with_cues", {}).items():
        e = m["expected_calls"]
        lines.append(f"| {source} | " + " | ".join(f"{e[k]['calls']:.2f} ({e[k]['accuracy']:.2f})"
                                                   for k, _ in POLICIES) + " |")
    lines.append("")
    carol = r.get("carol", {}).get("with_index")
    if carol:
        lines += [f"Christmas Carol, through `Router.aroute` with the index (local counts as right for a DRIFT "
                  f"label; DRIFT or global for a local label does not): {carol['right']}/{carol['n']}.", ""]
    acc = confident["right"] / confident["n"] if confident["n"] else None
    total = sum(m["n"] for m in r["loso"].get("with_cues", {}).values())
    return lines, [Headline("DRIFT/global decisions at confidence ≥ 0.8 that were right, leave-one-source-out",
                            f"{_f(acc)} (n={confident['n']} of {total:,} questions)", "routing-cost-and-calibration")]


_BAND_HEADS = (("< 0.55", "0.00-0.55"), ("0.55–0.7", "0.55-0.70"), ("0.7–0.8", "0.70-0.80"),
               ("0.8–0.9", "0.80-0.90"), ("≥ 0.9", "0.90-1.00"))


# ---- route-bench (benchmarks/route_bench.py) -----------------------------------------------------------

def route_bench(r: Json) -> tuple[list[str], list[Headline]]:
    cfg = r["config"]
    lines = [f"{r['queries']['count']} labelled questions on the Christmas Carol GraphRAG index (no question of the "
             f"router's training is about this book), model "
             f"`{r['model']['spec']}` ({r['model']['description']}); costs priced as "
             f"`{r['pricing'].get('chat_model', 'reported')}`. Latency p50 and p95 are over the questions; with "
             f"several repeats, p50 is the median (range) of each run's p50.", "",
             "| engine | p50 s | p95 s | model calls (mean) | prompt tokens (mean) | cost per question |",
             "|---|---|---|---|---|---|"]
    for engine in cfg["engines"]:
        s = r["summary"][engine]
        per_run = [x for x in s.get("latency_p50_by_repeat_s") or [] if isinstance(x, int | float)]
        p50 = _median_range(per_run, 2) if len(per_run) > 1 else _f(s["latency_p50_s"], 2)
        lines.append(f"| {engine} | {p50} | {_f(s['latency_p95_s'], 2)} | "
                     f"{s['llm_calls_mean']:.1f} | {s['prompt_tokens_mean']:,.0f} | ${s['cost_mean']:.4f} |")
    lines.append("")
    heads: list[Headline] = []
    for key, name in (("router", "router"), ("keyword_router", "keyword-router")):
        sec = r.get(key) or {}
        q = sec.get("quality")
        if not q:
            continue
        lines.append(f"- **{name}**: routes {q['correct']}/{q['n']} as labelled (macro-F1 {_f(q['macro_f1'])}); "
                     + "; ".join(f"against always {b}: {_pct(s['cost_saving_frac'])} of the cost saved"
                                 for b, s in sec.get("savings", {}).items() if s))
        calls = sec.get("expected_calls") or {}
        if key == "router" and calls:
            lines.append("- model calls per question: " + ", ".join(
                f"{k.replace('_', ' ')} {v:.2f}" for k, v in calls.items() if isinstance(v, int | float)))
        if key == "router":
            heads.append(Headline("Christmas Carol questions routed as labelled, local accepted for a DRIFT label "
                                  "(route-bench; none about this book in training, results seen during development)",
                                  f"{q['correct']}/{q['n']}", "route-bench"))
            savings = sec.get("savings", {})
            if savings.get("global") and savings.get("global-prerank"):
                heads.append(Headline(
                    "Router cost saved against always-global / always pre-ranked global (route-bench, Christmas Carol; "
                    "negative: the router costs more)",
                    f"{_pct(savings['global']['cost_saving_frac'])} / {_pct(savings['global-prerank']['cost_saving_frac'])}",
                    "route-bench"))
    lines.append("")
    return lines, heads


# ---- router frontier (benchmarks/router_frontier.py) --------------------------------------------------

FRONTIER_SUITES = (("earnings-one", "one-call questions, index of that call"),
                   ("earnings-one-doc", "the same questions, index of all 41 calls"),
                   ("earnings-cross-call", "how commentary evolved across the calls, all calls"),
                   ("earnings-corpus-wide", "corpus-wide questions, all calls"),
                   ("podcast-corpus-wide", "corpus-wide questions, podcast"),
                   ("nonsense-novel", "nonsense, novels"), ("nonsense-earnings_one", "nonsense, one call"),
                   ("nonsense-earnings", "nonsense, all calls"), ("nonsense-podcast", "nonsense, podcast"),
                   *((f"nonsense-mock-{i}", f"nonsense, {w}, real client against the loopback server")
                     for i, w in (("novel", "novels"), ("earnings_one", "one call"), ("earnings", "all calls"),
                                  ("podcast", "podcast"))))


def _routes(counts: Json) -> str:
    return ", ".join(f"{e} {n}" for e, n in counts.items()) or "-"


def router_frontier(r: Json) -> tuple[list[str], list[Headline]]:
    """The held-out novel sample's frontier table, the other novel samples, then the routing suites (read beside
    it)."""
    lines = [f"{r['queries']['count']} GraphRAG-Bench novel development questions held out from every change (a "
             "stratified sample disjoint from the tune and report halves below), on an offline index of all 20 novels "
             f"({r['index_facts']['text_units']} text units), offline model (deterministic: one run is the "
             "measurement). Evidence recall: share of the gold evidence claims found in the context the engine read; "
             "answer F1: token F1 of the extractive answer.", "",
             "| engine | model calls per question | cost per question | evidence recall | answer F1 |",
             "|---|---|---|---|---|"]
    for engine, s in r["engines"].items():
        lines.append(f"| {engine} | {s['calls_per_question']:.2f} | ${s['cost_per_question']:.4f} | "
                     f"{_f(s['evidence_recall'])} | {_f(s['answer_f1'])} |")
    router = r["router"]
    lines += ["", f"- Router routes: first decision {_routes(router['first_decision'])}; after confirmation "
              f"{_routes(router['after_confirmation'])}; after escalation {_routes(router['after_escalation'])}.", "",
              "Every novel sample (tune: the rules and the local context's linked-unit order were tuned on it; "
              "report: seen once before the last rule change, then measured once; held out: no change was looked "
              "at on it), the router against each fixed engine:", "",
              "| sample | questions | router cost / always-local | router on the frontier | engine | calls per "
              "question | cost per question | evidence recall | answer F1 |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name in ("novel-holdout", "novel-report", "novel-tune"):
        path = RESULTS / "router_frontier" / f"{name}.json"
        if not path.exists():
            continue
        s = json.loads(path.read_text(encoding="utf-8"))
        front = s["router"].get("frontier", {})
        verdict = "yes" if front.get("on_frontier") else \
            f"no: {', '.join(front.get('dominated_by', []))} is cheaper and at least as good"
        for i, (engine, e) in enumerate(s["engines"].items()):
            head = (f"| {name.removeprefix('novel-')} | {s['queries']['count']} | "
                    f"{s['router'].get('cost_over_local', 0):.2f}x | {verdict} |") if i == 0 else "| | | | |"
            lines.append(f"{head} {engine} | {e['calls_per_question']:.2f} | ${e['cost_per_question']:.4f} | "
                         f"{_f(e['evidence_recall'])} | {_f(e['answer_f1'])} |")
    lines += ["", "Routing on the other indexes (router and always-local; questions written by us, "
              "`benchmarks/data/router_frontier/`):", "",
              "| suite | questions | routes (first decision) | routes (after confirmation) | DRIFT/global at ≥ 0.8 | "
              "calls per question (max) | cost per question, router / always-local |", "|---|---|---|---|---|---|---|"]
    for name, what in FRONTIER_SUITES:
        path = RESULTS / "router_frontier" / f"{name}.json"
        if not path.exists():
            continue
        s = json.loads(path.read_text(encoding="utf-8"))
        ro = s["router"]
        lines.append(f"| {what} | {s['queries']['count']} | {_routes(ro['first_decision'])} | "
                     f"{_routes(ro['after_confirmation'])} | {ro['confident_expensive']} | "
                     f"{s['engines']['router']['calls_per_question']:.2f} ({ro['max_calls']}) | "
                     f"${s['engines']['router']['cost_per_question']:.4f} / "
                     + (f"${s['engines']['local']['cost_per_question']:.4f} |" if "local" in s["engines"] else "- |"))
    lines.append("")
    return lines, []  # on the page only: the README keeps its figures table short


# ---- start-up (benchmarks/cli_latency.py) --------------------------------------------------------------

def cli_latency(r: Json) -> tuple[list[str], list[Headline]]:
    lines = ["`graphroute ask` from process start to its last byte, offline model, one question, after the first",
             "run has filled the derived store.", "",
             "| index | wall time, median (range) | answers identical across runs |", "|---|---|---|"]
    heads = []
    for name, row in r["results"].items():
        walls = [run["wall_s"] for run in row.get("runs", []) if "wall_s" in run]
        same = "yes" if len(row.get("answer_digests", [])) == 1 else "no"
        lines.append(f"| {name} | {_median_range(walls, 2, ' s')} | {same} |")
        heads.append(Headline(f"`graphroute ask` wall time ({name})", _median_range(walls, 2, " s"), "start-up"))
    lines.append("")
    return lines, heads


# ---- before and after (benchmarks/before_after.py) ----------------------------------------------------

def _figure(f: Json) -> str:
    if "missing" in f:
        return f"not measured: {f['missing']}"
    unit, runs = f["unit"], f["runs"]
    digits = 0 if unit == "files" else 2
    if len(runs) == 1:
        return f"{runs[0]:.{digits}f} {unit}"
    return f"{f['median']:.{digits}f} ({f['range'][0]:.{digits}f}–{f['range'][1]:.{digits}f}) {unit}"


def before_after(r: Json) -> tuple[list[str], list[Headline]]:
    return _before_after(r, "One immutable routed question, the Router split into lifecycle, routing policy and "
                            "answer loop, and a shorter question path", "architecture",
                         "Each timing script ran for the before and the after checkout one after the other, so both met "
                         "about the same load.")


def before_after_engines(r: Json) -> tuple[list[str], list[Headline]]:
    return _before_after(r, "Per-question work of the engines and the offline model done once (a record's sentences "
                            "read once, prompts filled around their context when the engine is built, regular "
                            "expressions called without a wrapper)", "question_path_engines",
                         "The `graphroute ask` runs were made before first, then after. The scale runs shown are "
                         "the last of four pairs (after first here, before first in two of the others); in the three "
                         "earlier pairs the after side was slower, by 0.7–3.2 ms of CPU p50, while the 1-minute load "
                         "moved between 2 and 5: at this size the load moves the context p50 more than this change, "
                         "whose only code on the context builder's path is the regular-expression wrapper.")


def before_after_router(r: Json) -> tuple[list[str], list[Headline]]:
    return _before_after(r, "The router's modules that always run together folded (the loop thread into the lifecycle, "
                            "cue lexicons and wording reasons into the features, document names into the index "
                            "profile, the step-down plan into the answer loop)", "question_path_router",
                         "Each timing script ran for the before and the after checkout one after the other (before "
                         "first); a second pair run the other way round (`second_pair/`) gave `graphroute ask` "
                         f"{_pair('second_pair')}, so at this load the ask timings move more with the load than "
                         "with this change. The routes, confidences, probabilities and reasons of 180 questions on "
                         "the Christmas Carol index (its 30 route-bench questions and 150 labelled ones) are "
                         "identical before and after, and so is the answer of every `graphroute ask` run.")


def _pair(folder: str) -> str:
    """The `graphroute ask` wall and CPU figures of another before/after pair kept beside this one."""
    path = RESULTS / "question_path_router" / folder / "before_after.json"
    other = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for name in ("`graphroute ask` wall time, Christmas Carol", "`graphroute ask` CPU (user + system), Christmas Carol"):
        cells.append(f"{name.split(', ')[0].replace('`graphroute ask` ', '')} "
                     f"{_figure(other['before']['figures'][name])} before, "
                     f"{_figure(other['after']['figures'][name])} after")
    return "; ".join(cells)

def before_after_shared(r: Json) -> tuple[list[str], list[Headline]]:
    return _before_after(r, "Modules of one concern that every question entered folded together (the per-index cache "
                            "into `shared_context/tables.py`, the local context's graph sections into "
                            "`local_context.py`, the insufficient-context mark into `engines/models/base.py`) and the "
                            "engine's model per stage looked up once instead of through the model factory on every "
                            "call", "question_path_shared",
                         "The runs shown are the third of three pairs (before first here and in the first pair, after "
                         "first in the second), with the 1-minute load between 5 and 7.5 on two cores. Local-context "
                         "CPU p50 after against before: 10.6 / 10.0, 9.9 / 11.0, 8.7 / 8.8 ms (the sides swap places). "
                         "`graphroute ask` CPU was higher after in every pair, 2.06 / 1.68, 1.71 / 1.52, 1.51 / 1.45 s, "
                         "and in two more pairs of five runs each (before, after, after, before) 1.53 and 1.59 after "
                         "against 1.51 and 1.53 before, every time inside the other side's range; the work itself "
                         "did not grow: the question path's function count is 688 before and after for the first "
                         "question and 510 before, 509 after for the second, and no code on the path changed beyond "
                         "which module holds it. The offline answers and contexts of 12 questions are identical "
                         "before and after (`tests/test_answer_digests.py`).")


def _before_after(r: Json, change: str, folder: str, how_run: str) -> tuple[list[str], list[Headline]]:
    before, after = r["before"], r["after"]
    lines = [f"{change}: commit `{before['commit'] or '?'}` (before) against `{after['commit'] or '?'}` "
             "(after), each measured by the scripts named in the result files beside this one "
             f"(`benchmarks/results/{folder}/`), median (range) over their runs. The question path counts the "
             "project files (`router`, `engines`, `shared_context`) in which at least one Python function (module "
             f"bodies included) ran while an auto-routed question was answered, in every thread. {how_run}", "",
             "| figure | before | after |", "|---|---|---|"]
    for name in r["figures"]:
        lines.append(f"| {name} | {_figure(before['figures'][name])} | {_figure(after['figures'][name])} |")
    loads = sorted({str(s.get("load_avg_start", ["?"])[0]) for side in (before, after)
                    for s in side["sources"].values() if s.get("load_avg_start")})
    lines += ["", f"The 2-core machine was shared while these ran (1-minute load averages at the starts: "
              f"{', '.join(f'{float(x):.1f}' for x in loads)}); the ranges show how much that moved the timings.", ""]
    lines += _own_commits(before, after)
    return lines, []


def _own_commits(before: Json, after: Json) -> list[str]:
    """A line for each source file that records its own commit (measured apart from the rest, e.g. later and
    merged from interleaved runs by benchmarks.scale_merge): its commit, date, command and how it was run."""
    out = []
    for label, side in (("before", before), ("after", after)):
        for rel, source in side["sources"].items():
            if source.get("commit"):
                note = f" {source['note'].rstrip('.')}." if source.get("note") else ""
                out.append(f"- `{label}/{rel}`: commit `{source['commit']}`, {source.get('date', '?')}, "
                           f"`{source.get('command', '?')}`.{note}")
    return [*out, ""] if out else []


# ---- scale (benchmarks/scale.py) -----------------------------------------------------------------------

def _cell(row: Json, key: str, digits: int) -> str:
    value, span = row.get(key), row.get(f"{key}_range")
    if not isinstance(value, int | float):
        return "-"
    if isinstance(span, list) and len(span) == 2:
        return f"{value:.{digits}f} ({span[0]:.{digits}f}–{span[1]:.{digits}f})"
    return f"{value:.{digits}f}"


def scale(r: Json) -> tuple[list[str], list[Headline]]:
    lines = [f"Synthetic indexes in GraphRAG's layout (with a `lancedb/` folder), median (range) over {r.get('runs', 1)}"
             " runs. Title shapes: `unique` names, `realistic` names (shared first names and surnames, common "
             "words), `type-word` (a type word in every title).", "",
             "| titles | entities | first open (s) | first-open peak RSS (MiB) | second process: import + load + first "
             "context (s) | local p50 (ms) | basic p50 (ms) | second-open peak RSS (MiB) |",
             "|---|---|---|---|---|---|---|---|"]
    heads = []
    for shape, by_size in r["results"].items():
        for n, row in sorted(by_size.items(), key=lambda kv: int(kv[0])):
            first, second = row.get("first", {}), row.get("second", {})
            if "error" in first or "error" in second:
                lines.append(f"| {shape} | {int(n):,} | failed: {first.get('error') or second.get('error')} |||||||")
                continue
            lines.append(f"| {shape} | {int(n):,} | {_cell(first, 'load_s', 1)} | {_cell(first, 'peak_rss_mb', 0)} | "
                         f"{_cell(second, 'cold_s', 2)} | {_cell(second, 'local_p50_ms', 1)} | "
                         f"{_cell(second, 'basic_p50_ms', 1)} | {_cell(second, 'peak_rss_mb', 0)} |")
            if shape == "type-word":
                heads.append(Headline(f"Second process: import + load + first context, {int(n):,} entities",
                                      _cell(second, "cold_s", 2) + " s", "scale"))
                heads.append(Headline(f"Local context p50, {int(n):,} entities", _cell(second, "local_p50_ms", 1)
                                      + " ms", "scale"))
    lines.append("")
    return lines, heads


def prepare_scale(r: Json) -> tuple[list[str], list[Headline]]:
    """`graphroute prepare` at scale, then fresh processes opening the prepared store (benchmarks/prepare_scale.py);
    on this page only (the README's table is full)."""
    lines = ["`graphroute prepare` on synthetic indexes in GraphRAG's layout (a type word in every title, LanceDB "
             "vectors; offline models, so prepare also embeds every text with the offline embedder), then fresh "
             f"processes opening the prepared store: the check a replica makes, `load_index` and the first local "
             f"context (linking included, no model call). Prepare runs once per size; the opens are the median "
             f"(range) over {r.get('runs', 1)} processes.", "",
             "| entities | prepare wall (CPU) s | prepare peak RSS (MiB) | store (MiB) | open (s) | first local context (s) | "
             "process age at the end (s) | open peak RSS (MiB) |", "|---|---|---|---|---|---|---|---|"]
    for n, row in sorted(r["results"].items(), key=lambda kv: int(kv[0])):
        prep, opened = row.get("prepare", {}), row.get("open", {})
        if "error" in prep or not opened.get("runs_ok"):
            lines.append(f"| {int(n):,} | failed: {prep.get('error') or 'no open succeeded'} |||||||")
            continue
        lines.append(f"| {int(n):,} | {prep['wall_s']:.0f} ({prep['cpu_s']:.0f}) | {prep['peak_rss_mb']:.0f} | {row.get('store_mb', 0):.0f} | "
                     f"{_cell(opened, 'open_s', 2)} | {_cell(opened, 'first_context_s', 2)} | "
                     f"{_cell(opened, 'cold_s', 2)} | {_cell(opened, 'peak_rss_mb', 0)} |")
    verdicts = [f"Target at {v}" for v in r.get("verdicts", [])]
    lines += ["", *verdicts, *([""] if verdicts else [])]
    return lines, []


# ---- service (benchmarks/serve_load.py) ----------------------------------------------------------------

def serve_load(r: Json) -> tuple[list[str], list[Headline]]:
    runs = r.get("runs", [r])
    lines = [f"`graphroute serve` under {r['clients']} concurrent clients, {r['requests']} forced-local chat "
             f"completions per run, a loopback model answering after {r['latency_ms']:g} ms (at most "
             f"{r['model_concurrency']} calls in flight), service workers: {r['service_workers']}. Median (range) "
             f"over {len(runs)} runs.", "",
             "| requests/s | p50 s | p95 s | errors |", "|---|---|---|---|"]
    cells = [_median_range([run[k] for run in runs], d) for k, d in
             (("throughput_rps", 1), ("p50_s", 2), ("p95_s", 2), ("errors", 0))]
    lines += ["| " + " | ".join(cells) + " |", ""]
    return lines, [Headline(f"Service, {r['clients']} clients, {r['latency_ms']:g} ms model: requests/s",
                            cells[0], "service-load")]


def serve_replicas(r: Json) -> tuple[list[str], list[Headline]]:
    """One against two replicas behind HAProxy with one Redis, and the cost the shared cache saves."""
    lines = [f"`graphroute serve` replicas behind HAProxy with one Redis (deployed from `docs/deploy`), "
             f"{r['clients']} concurrent clients, {r['requests']} forced-local chat completions per run, each its "
             f"own question; a loopback model answering after {r['latency_ms']:g} ms with at most "
             f"{r['model_concurrency_per_replica']} calls in flight per replica, so the model bounds each replica. "
             "Every process shares the machine's cores. Median (range) over the runs.", "",
             "| replicas | requests/s | p50 s | p95 s | errors |", "|---|---|---|---|---|"]
    rps: dict[str, str] = {}
    for label, figures in r["throughput"].items():
        runs = figures["runs"]
        cells = [_median_range([run[k] for run in runs], d) for k, d in
                 (("throughput_rps", 1), ("p50_s", 2), ("p95_s", 2), ("errors", 0))]
        rps[label] = cells[0]
        lines.append(f"| {label.split('_')[0]} | " + " | ".join(cells) + " |")
    work = r["cost_workload"]
    lines += ["", f"Cost of {work['distinct_questions']} distinct questions asked {work['repeats']} times each "
              f"through the load balancer to two replicas (priced as {work['priced_as']}):", "",
              "| model-call cache | model calls | cached calls | cost $ |", "|---|---|---|---|"]
    for label, c in work["by_cache"].items():
        lines.append(f"| {label} | {c['model_calls']} | {c['cached_calls']} | {c['cost_usd']:.4f} |")
    lines.append("")
    costs = work["by_cache"]
    saved = 1 - costs["shared Redis cache"]["cost_usd"] / costs["no cache"]["cost_usd"]
    heads = [Headline("Two replicas against one, model-bound: requests/s", f"{rps['2_replicas']} against "
                      f"{rps['1_replica']}", "service-replicas"),
             Headline(f"Shared cache, each question asked {work['repeats']} times over two replicas: cost saved",
                      f"{100 * saved:.0f} %", "service-replicas")]
    return lines, heads


# ---- evidence (benchmarks/evidence_recall.py) -----------------------------------------------------------

def evidence(r: Json) -> tuple[list[str], list[Headline]]:
    lines = [r.get("about", "Share of the silver evidence spans each context shows, at the same token budget."),
             "", "| subset | method | budget | evidence spans found | outside front/back matter |", "|---|---|---|---|---|"]
    headline: dict[tuple[str, int], dict[str, float]] = {}
    for row in r["rows"]:
        lines.append(f"| {row['subset']} | {row['method']} | {row['budget']:,} | {_f(row['span_hit'])} | "
                     f"{_f(row.get('span_hit_story'))} |")
        if row.get("headline"):
            headline.setdefault((row["subset"], row["budget"]), {})[row["method"]] = row["span_hit"]
    lines.append("")
    gaps = r.get("margins_vs_bm25") or []
    if gaps:
        lines += ["Margin over plain BM25, question by question (evidence spans found minus BM25's), with a 95 % "
                  "bootstrap interval over the questions; `tune` and `confirm` are the two halves of the questions "
                  "(`--half`). Most settings were chosen on `tune`; the window re-ranking of the lexical ranking and "
                  "the local context's shares without reports were chosen looking at both halves, so no half is "
                  "held out and every figure here is a development figure:", "",
                  "| subset | method | budget | questions | margin | 95 % interval |", "|---|---|---|---|---|---|"]
        for g in gaps:
            lines.append(f"| {g['subset']} | {g['method']} | {g['budget']:,} | {g['half']} ({g['questions']}) | "
                         f"{g['margin']:+.3f} | {g['low']:+.3f} to {g['high']:+.3f} |")
        lines.append("")
    names = {"local-hybrid": "local", "basic": "basic", "bm25": "plain BM25"}
    heads = [Headline(f"Evidence spans in a {budget:,}-token context, {subset} development questions (settings chosen on them)",
                      " / ".join(f"{names.get(m, m)} {_f(v)}" for m, v in sorted(found.items(), key=lambda kv: kv[0] != "local-hybrid")),
                      "evidence") for (subset, budget), found in sorted(headline.items())]
    return lines, heads


# ---- boilerplate (benchmarks/boilerplate_quality.py) ----------------------------------------------------

def boilerplate(r: Json) -> tuple[list[str], list[Headline]]:
    lines = ["Licence and edition boilerplate found at documents' ends, against hand-labelled spans "
             "(`benchmarks/data/boilerplate_gold.json`).", "",
             "| documents | character precision | character recall | unit precision | unit recall |",
             "|---|---|---|---|---|"]
    sets = [(f"novels, {name}", m) for name, m in r["novels"].items() if isinstance(m, dict) and "characters" in m]
    sets += [(f"Christmas Carol, {name.replace('_', ' ')}", m) for name, m in r["christmas_carol"].items()
             if isinstance(m, dict) and "characters" in m]
    for name, m in sets:
        c, u = m["characters"], m["units"]
        lines.append(f"| {name} | {_f(c['precision'])} | {_f(c['recall'])} | {_f(u['precision'])} | {_f(u['recall'])} |")
    clean = r.get("without_boilerplate", {})
    if clean:
        lines += ["", "Documents without any boilerplate: " + "; ".join(
            f"{name}: {m['units_marked']} of {m['units']} units marked" for name, m in clean.items()) + "."]
    lines.append("")
    return lines, []


# ---- offline graph top 20 (benchmarks/extraction_quality.py --top20) ----------------------------------------

def graph_top20(r: Json) -> tuple[list[str], list[Headline]]:
    earlier = r.get("compared_with") or {}
    shares = earlier.get("shares", {})
    lines = ["The share of the offline graph's 20 entities of highest degree that a reader would list for the corpus "
             "(hand-written lists, `benchmarks/data/reader_entities.json`; an unmerged alias of an entity already "
             f"credited counts as a miss). Extractor `{r['extractor']}`"
             + (f"; beside it `{earlier['extractor']}` ({earlier['file']})." if earlier else ".")
             + " The extractor's rules were changed while reading these top-20 lists: a development figure, not a "
             "held-out one.", ""]
    head = "| corpus | entities | reader share of the top 20 |" + (" earlier |" if earlier else "")
    lines += [head, "|---|---|---|" + ("---|" if earlier else "")]
    for key, m in r["corpora"].items():
        row = f"| {m['label']} | {m['entities']} | {_pct(m['share'])} |"
        if earlier:
            row += f" {_pct(shares.get(key))} |"
        lines.append(row)
    lines += ["", "Top 20 (x: not on the reader's list, or a duplicate):", ""]
    for m in r["corpora"].values():
        lines.append(f"- {m['label']}: " + ", ".join(
            f"{e['title']} [{e['type']}]" + ("" if e["reader_entry"] else " (x)") for e in m["top"]))
    lines.append("")
    values = [m["share"] for m in r["corpora"].values()]
    figure = (f"{_pct(statistics.median(values))} ({_pct(min(values))}–{_pct(max(values))}, {len(values)} corpora)"
              if values else "-")
    return lines, [Headline("Offline graph: reader share of the top 20 entities by degree, median over corpora (rules written while reading these lists)",
                            figure, "")]


# ---- index routing (benchmarks/index_routing.py) -----------------------------------------------------------

def _sibling(name: str) -> Json | None:
    path = RESULTS / "index_routing" / name
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _selection_row(label: str, r: Json) -> str:
    a = r["accuracy"]
    parts = [f"{a[k]['right']}/{a[k]['of']}" if k in a else "-" for k in ("one_index", "several", "none")]
    return f"| {label} | {r['questions']} | {_pct(a['overall'])} | {' | '.join(parts)} |"


def index_routing(r: Json) -> tuple[list[str], list[Headline]]:
    """Index selection over six offline indexes: the second held-out set (this file, never tuned on), the first
    held-out set's first run and its run now (tuned on its misses since), the dev questions, the engine with and
    without index routing, the probe, global fan-out."""
    first, again = _sibling("index_routing_heldout.json"), _sibling("index_routing_heldout_after.json")
    dev, fan = _sibling("index_routing_probe.json"), _sibling("index_routing_global_fanout.json")
    lines = [f"Questions asked with no index named over six offline indexes ({', '.join(r['indexes'])}). The second "
             f"held-out set (`{r['question_file']}`) was written after the last change to the index router, "
             "committed before its one run, and nothing was tuned on it; it was written by a developer of the router, "
             "not by other people. The first held-out set was looked at after its first run and the router changed "
             "on its misses: its figure now is a dev figure.", "",
             "| questions | n | right index | one index | two indexes | none |", "|---|---|---|---|---|---|",
             _selection_row("second held-out set (never tuned on)", r)]
    if first is not None:
        lines.append(_selection_row("first held-out set, first run", first))
    if again is not None:
        lines.append(_selection_row("first held-out set now (tuned on its misses: not independent)", again))
    if dev is not None:
        lines.append(_selection_row("dev (tuned on these: not independent)", dev))
    agree = r["engine_agreement"]
    lines += ["", f"Engine decision with index routing against the index named (second held-out set, one-index questions): the same "
              f"engine on {agree['same_engine']} of {agree['one_index_questions']} ({agree['same_engine_on_right_index']} "
              f"of the {agree['right_index']} routed to the right index).", ""]
    lines += _other_people(_sibling("index_routing_graphrag_bench.json"), _sibling("index_routing_graphrag_bench_before.json"),
                           _sibling("index_routing_graphrag_bench_discarded.json"))
    heads: list[Headline] = []  # the README's table keeps to its length: these figures are on the page only
    if dev is not None and "p50_per_run" in dev["probe_ms"]:
        runs = dev["probe_ms"]["p50_per_run"]
        figure = _median_range(runs, 2, " ms")
        lines += [f"Index probe over the six indexes, p50 per run (each run asks the {dev['questions']} dev questions "
                  f"once): {figure}; machine of that run: {_machine(dev)}.", ""]
    if fan is not None and "global_fanout" in fan:
        g = fan["global_fanout"]["totals"]
        lines += [f"Global search on the {fan['global_fanout']['questions']} dev questions that fan out over two "
                  f"indexes (offline model, global search forced): one map over both indexes' reports and one "
                  f"reduce made {g['calls']} model calls and {g['prompt_tokens']:,} prompt tokens; a global search on "
                  f"each index made {g['per_index_calls']} calls and {g['per_index_prompt_tokens']:,} prompt tokens "
                  f"(`{_shown(RESULTS / 'index_routing' / 'index_routing_global_fanout.json')}`).", ""]
    return lines, heads


def _half_row(label: str, half: Json) -> str:
    cells = [f"{v['right']}/{v['of']}" for v in half["by_source"].values()]
    return (f"| {label} | {half['right']}/{half['questions']} ({_pct(half['accuracy'])}) | {' | '.join(cells)} | "
            f"{_pct(half['fanout_rate'])} | {_pct(half['none_rate'])} |")


def _other_people(r: Json | None, before: Json | None, discarded: Json | None) -> list[str]:
    """Other people's questions over the six full indexes: the dev and report halves, before and after the change
    made on the dev half, per source and question type, and the probe over the full indexes."""
    if r is None or "halves" not in r:
        return []
    sources = list(r["halves"]["report"]["by_source"])
    lines = ["**Other people's questions over full indexes.** With `--full-indexes` and `--questions graphrag-bench`, "
             f"the podcast, earnings, novel and medical indexes are the whole corpora, and the questions are a seeded "
             f"sample ({r['per_type']} per source and question type, seed {r['seed']}) written by other people: "
             "GraphRAG-Bench novel and medical dev questions, and MultiHop-RAG questions about sports and "
             "entertainment news, which no index holds (right answer: none). They are split by a hash of the "
             "question id into a dev half, which the index router was changed on, and a report half whose questions "
             "and misses were never looked at (only its totals, once after each version of the change). The Microsoft GraphRAG benchmark questions are not used: they are held out.", "",
             "| half | right index | " + " | ".join(sources) + " | fan-out | none |",
             "|---|---|" + "---|" * len(sources) + "---|---|"]
    if before is not None:
        lines += [_half_row("dev half, before the change", before["halves"]["dev"]),
                  _half_row("report half, before the change", before["halves"]["report"])]
    lines.append(_half_row("dev half, after (changed on it: not independent)", r["halves"]["dev"]))
    if discarded is not None:
        lines.append(_half_row("report half, a first version of the change, withdrawn", discarded["halves"]["report"]))
    lines += [_half_row("**report half, after** (its questions and misses never looked at)", r["halves"]["report"]), ""]
    types = [f"{src} {t} {v['right']}/{v['of']}" for src, part in r["halves"]["report"]["by_source"].items()
             for t, v in part["by_type"].items()]
    probe = r["probe_ms"]
    lines += [f"Report half by question type: {'; '.join(types)}.", "",
              f"Probe over the six full indexes, p50 per run (each run asks the {r['questions']} questions once): "
              f"{_median_range(probe['p50_per_run'], 2, ' ms')}; machine of that run: {_machine(r)}."
              + "".join(f" An earlier run of the same questions: {_median_range(e['probe_ms']['p50_per_run'], 2, ' ms')} "
                        f"({_machine(e)}; a CI run shared the cores)." for e in (before, discarded) if e is not None)
              + " Other people's questions are about twice as long as ours (22 words against 12 at the median) and the "
                "full indexes' longest titles have 12 words against 8-9: matching titles looks up every word sequence "
                "up to that length, most of the probe's time.", ""]
    return lines


SECTIONS = (
    Section("routing", "Routing", "router_eval/router_eval.json", routing),
    Section("routing-cost-and-calibration", "Routing cost and calibration", "router_eval/router_cost.json",
            routing_cost),
    Section("route-bench", "route-bench", "route_bench/christmas_carol/report.json", route_bench),
    Section("router-frontier", "Router frontier", "router_frontier/novel-holdout.json", router_frontier),
    Section("evidence", "Evidence", "evidence_recall/evidence_recall.json", evidence),
    Section("boilerplate", "Boilerplate", "boilerplate/boilerplate_quality.json", boilerplate),
    Section("offline-graph-top-20", "Offline graph, top 20", "extraction_quality/top20.json", graph_top20),
    Section("index-routing", "Index routing", "index_routing/index_routing_heldout2.json", index_routing),
    Section("start-up", "Start-up", "cli_latency/cli_latency.json", cli_latency),
    Section("scale", "Scale", "scale/scale.json", scale),
    Section("scale-at-1m-entities", "Scale at 1M entities", "scale_1m/scale.json", scale),
    Section("scale-at-1m-entities-unique-titles", "Scale at 1M entities, unique titles", "scale_1m_unique/scale.json",
            scale),
    Section("before-and-after-the-routed-question", "Before and after the routed question",
            "architecture/before_after.json", before_after),
    Section("before-and-after-the-engines-question-path", "Before and after: the engines' question path",
            "question_path_engines/before_after.json", before_after_engines),
    Section("before-and-after-the-routers-question-path", "Before and after: the router's question path",
            "question_path_router/before_after.json", before_after_router),
    Section("before-and-after-folded-modules", "Before and after: folded modules on the question path",
            "question_path_shared/before_after.json", before_after_shared),
    Section("prepared-store", "Prepared store", "prepare_scale/prepare_scale.json", prepare_scale),
    Section("prepared-store-at-1m-entities", "Prepared store at 1M entities", "prepare_scale_1m/prepare_scale.json",
            prepare_scale),
    Section("service-load", "Service load", "serve/serve_load.json", serve_load),
    Section("service-replicas", "Service replicas", "serve/serve_replicas.json", serve_replicas),
)

INTRO = """# Benchmarks

Every figure here is read from a result file under `benchmarks/results/`, written by the script named in its
section; this page is generated from those files by `python -m tools.docs.benchmarks_page` (a test fails when it
is out of date). Rerun a section's command to measure your own machine. Timings are the median and the range
over runs, never the best run.
"""


def _render_section(section: Section, path: Path) -> tuple[list[str], list[Headline]]:
    """A section's lines (provenance, then figures) and headlines; a result file that cannot be read, or that lacks a field the section
    needs (written by another version of its script), stops the generator with a message naming the file."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(report, dict):
            raise TypeError("the file holds no JSON object")
        body, found = section.render(report)
        return [*_provenance(report, path), *body], found
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{_shown(path)}: not a readable result file ({exc})") from None
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise SystemExit(f"{_shown(path)}: the {section.title!r} section cannot read it "
                         f"({type(exc).__name__}: {exc}); rerun the command named in the file") from None


def render() -> tuple[str, str]:
    """The benchmarks page, and the README's figures table."""
    page = [INTRO]
    heads: list[Headline] = []
    for section in SECTIONS:
        path = RESULTS / section.path
        if not path.exists():
            continue
        body, found = _render_section(section, path)
        page += [f"## {section.title}", "", *body]
        heads += [Headline(h.what, h.figure, section.anchor) for h in found]  # link to this section
    table = ["| what | figure |", "|---|---|"]
    table += [f"| [{h.what}](docs/benchmarks.md#{h.anchor}) | {h.figure} |" for h in heads]
    return "\n".join(page).rstrip() + "\n", "\n".join(table)


def _readme_with(table: str) -> str:
    text = README.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{README} has no {README_START} ... {README_END} block")
    return pattern.sub(lambda _: f"{README_START}\n{table}\n{README_END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page or the README table is stale")
    args = parser.parse_args(argv)
    page, table = render()
    readme = _readme_with(table)
    if args.check:
        stale = [str(p) for p, text in ((PAGE, page), (README, readme))
                 if not p.exists() or p.read_text(encoding="utf-8") != text]
        if stale:
            print(f"stale: {', '.join(stale)}: run python -m tools.docs.benchmarks_page", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    README.write_text(readme, encoding="utf-8")
    print(f"wrote {PAGE} and the figures table of {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
