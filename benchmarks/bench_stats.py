"""Aggregate figures from per-query rows: percentiles, per-engine summaries, routing quality, savings.

Rows are plain dicts (exactly what `report.json` stores under `rows`) so a saved report can be
re-summarised without re-running anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

ROUTE_CLASSES = ("local", "global", "drift", "basic")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), `None` for no values."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summarize_engine(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Latency, calls, tokens, cost and failures of one engine (or the router) over its rows."""
    rows = list(rows)
    ok = [r for r in rows if r["ok"]]
    lat = [r["seconds"] for r in ok]
    costs = [r["cost"] for r in ok]
    n_ok = len(ok)

    def mean(key: str) -> float:
        return sum(r[key] for r in ok) / n_ok if n_ok else 0.0

    return {
        "runs": len(rows),
        "ok": n_ok,
        "failures": len(rows) - n_ok,
        "degraded": sum(1 for r in ok if r["degraded"]),
        "empty": sum(1 for r in ok if r.get("empty")),
        "latency_p50_s": percentile(lat, 50),
        # each repeat's p50 over the questions, so a report of several repeats shows the spread between runs
        "latency_p50_by_repeat_s": [percentile([r["seconds"] for r in ok if r["repeat"] == k], 50)
                                    for k in sorted({r["repeat"] for r in ok})],
        "latency_p95_s": percentile(lat, 95),
        "latency_p99_s": percentile(lat, 99),
        "latency_mean_s": sum(lat) / n_ok if n_ok else None,
        "llm_calls_mean": mean("llm_calls"),
        "prompt_tokens_mean": mean("prompt_tokens"),
        "output_tokens_mean": mean("output_tokens"),
        "cost_mean": mean("cost"),
        "cost_p50": percentile(costs, 50),
        "cost_p95": percentile(costs, 95),
        "llm_calls_total": sum(r["llm_calls"] for r in ok),
        "prompt_tokens_total": sum(r["prompt_tokens"] for r in ok),
        "output_tokens_total": sum(r["output_tokens"] for r in ok),
        "cached_calls_total": sum(r["cached_calls"] for r in ok),
        "cost_total": sum(costs),
        "seconds_total": sum(lat),
    }


def routing_quality(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Accuracy, macro-F1, per-class precision/recall/F1 and the confusion matrix of (label, predicted).

    Macro-F1 averages over the classes that occur as a label or a prediction, so a class never seen
    and never predicted does not count as a perfect 1.0.
    """
    if not pairs:
        return {"n": 0}
    classes = [c for c in ROUTE_CLASSES if any(c in p for p in pairs)]
    classes += sorted({c for p in pairs for c in p} - set(classes))
    confusion = {t: {p: 0 for p in classes} for t in classes}
    for truth, pred in pairs:
        confusion[truth][pred] += 1
    per_class: dict[str, dict[str, float | int]] = {}
    for c in classes:
        tp = confusion[c][c]
        fp = sum(confusion[t][c] for t in classes if t != c)
        fn = sum(confusion[c][p] for p in classes if p != c)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[c] = {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn}
    correct = sum(1 for t, p in pairs if t == p)
    return {
        "n": len(pairs),
        "correct": correct,
        "accuracy": correct / len(pairs),
        "macro_f1": sum(float(v["f1"]) for v in per_class.values()) / len(per_class),
        "per_class": per_class,
        "confusion": confusion,
        "classes": classes,
    }


def router_savings(rows: Sequence[dict[str, Any]], baseline: str, target: str = "router") -> dict[str, Any] | None:
    """Router cost and time against always using `baseline`, on the (query, repeat) pairs both answered."""
    by_key = {(r["query_id"], r["repeat"]): r for r in rows if r["engine"] == baseline and r["ok"]}
    pairs = [(r, by_key[(r["query_id"], r["repeat"])]) for r in rows
             if r["engine"] == target and r["ok"] and (r["query_id"], r["repeat"]) in by_key]
    if not pairs:
        return None
    router_cost = sum(r["cost"] for r, _ in pairs)
    base_cost = sum(b["cost"] for _, b in pairs)
    router_s = sum(r["seconds"] for r, _ in pairs)
    base_s = sum(b["seconds"] for _, b in pairs)
    router_calls = sum(r["llm_calls"] for r, _ in pairs)
    base_calls = sum(b["llm_calls"] for _, b in pairs)
    return {
        "baseline": baseline,
        "pairs": len(pairs),
        "router_cost": router_cost,
        "baseline_cost": base_cost,
        "cost_saving_frac": 1 - router_cost / base_cost if base_cost > 0 else None,
        "router_seconds": router_s,
        "baseline_seconds": base_s,
        "time_saving_frac": 1 - router_s / base_s if base_s > 0 else None,
        "router_llm_calls": router_calls,
        "baseline_llm_calls": base_calls,
        "calls_saving_frac": 1 - router_calls / base_calls if base_calls > 0 else None,
    }


def router_section(rows: Sequence[dict[str, Any]], target: str = "router") -> dict[str, Any] | None:
    """Everything about one router target (the trained router or the keyword baseline): route mix, quality
    against labels, savings, cost per correct route."""
    routed = [r for r in rows if r["engine"] == target]
    if not routed:
        return None
    ok = [r for r in routed if r["ok"]]
    mix: dict[str, int] = {}
    used: dict[str, int] = {}
    for r in ok:
        mix[r["route"]] = mix.get(r["route"], 0) + 1
        used[r["engine_used"]] = used.get(r["engine_used"], 0) + 1
    # The decision is a pure function of the question, so quality is scored once per query (repeat 0).
    labelled = [r for r in ok if r["label"] and r["repeat"] == 0]
    # a route the query's `alt` reading also accepts is scored as that label: never the cheaper right route as an error
    quality = routing_quality([(r["route"] if r.get("alt") == r["route"] else r["label"], r["route"])
                               for r in labelled]) if labelled else None
    section: dict[str, Any] = {
        "route_mix": dict(sorted(mix.items())),
        "engine_used_mix": dict(sorted(used.items())),
        "escalations": sum(1 for r in ok if r.get("escalations")),
        "quality": quality,
        "savings": {b: router_savings(rows, b, target) for b in ("global", "global-prerank", "drift")},
    }
    section["expected_calls"] = expected_calls(rows, target)
    if quality and quality["n"]:
        labelled_ids = {r["query_id"] for r in labelled}
        labelled_rows = [r for r in ok if r["query_id"] in labelled_ids]
        repeats = len({r["repeat"] for r in labelled_rows}) or 1
        cost = sum(r["cost"] for r in labelled_rows) / repeats
        section["cost_per_correct_route"] = cost / quality["correct"] if quality["correct"] else None
        section["labelled_cost_per_repeat"] = cost
    return section


def expected_calls(rows: Sequence[dict[str, Any]], target: str = "router") -> dict[str, float | None]:
    """Mean model calls per question: the router as run (after confirmation and escalation), what its first engine
    alone cost (the same question run by that engine on its own), its second-opinion calls, every fixed engine,
    and an oracle that runs the cheapest right engine, the label or its `alt` (None where a run is missing)."""
    ok = [r for r in rows if r["ok"]]
    alone = {(r["engine"], r["query_id"], r["repeat"]): r["llm_calls"] for r in ok if r["engine"] not in ROUTERS}
    routed = [r for r in ok if r["engine"] == target]
    out: dict[str, float | None] = {"router_after_escalation": _mean(r["llm_calls"] for r in routed)}
    first = [alone.get((r["tried"][0], r["query_id"], r["repeat"])) for r in routed if r.get("tried")]
    out["router_first_engine"] = _mean(first) if first and None not in first else None
    out["router_second_opinion"] = _mean(r["usage"]["stages"].get("classify", {}).get("llm_calls", 0) for r in routed)
    for engine in sorted({r["engine"] for r in ok if r["engine"] not in ROUTERS}):
        out[f"always_{engine}"] = _mean(r["llm_calls"] for r in ok if r["engine"] == engine)
    oracle = [_cheapest([alone.get((e, r["query_id"], r["repeat"])) for e in (r["label"], r.get("alt")) if e])
              for r in routed if r["label"]]
    out["oracle"] = _mean(oracle) if oracle and None not in oracle else None
    return out


ROUTERS = ("router", "keyword-router")


def _cheapest(calls: list[int | None]) -> int | None:
    """The fewest calls of the right engines' runs (None when one is missing)."""
    return None if not calls or None in calls else min(c for c in calls if c is not None)


# ---- answer quality (route-bench --grade) ----------------------------------------------------------

OFFLINE_QUALITY = ("f1", "answer_recall", "evidence_recall", "citation_validity")
JUDGE_QUALITY = ("score", "faithfulness", "context_precision", "context_recall")


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def headline(row: dict[str, Any]) -> float | None:
    """The one quality figure of a graded row: the judge's score when judged, else token F1."""
    grade = row.get("grade") or {}
    judge = grade.get("judge") or {}
    return judge["score"] if judge.get("score") is not None else grade.get("f1")


def quality_of(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean of every quality measure over graded rows, judge verdict counts and judge usage.

    A failed run counts as quality 0 in the headline (a user got no answer), never silently dropped.
    """
    graded = [r for r in rows if r.get("grade")]
    failed = [r for r in rows if not r["ok"]]
    out: dict[str, Any] = {"graded": len(graded), "failed": len(failed)}
    for key in OFFLINE_QUALITY:
        out[key] = _mean(r["grade"].get(key) for r in graded)
    judged = [r["grade"]["judge"] for r in graded if r["grade"].get("judge")]
    out["judged"] = len(judged)
    for key in JUDGE_QUALITY:
        out[f"judge_{key}"] = _mean(j.get(key) for j in judged)
    out["verdicts"] = {v: sum(1 for j in judged if j.get("verdict") == v) for v in ("correct", "partially", "incorrect")}
    out["judge_calls"] = sum(j.get("judge_calls", 0) for j in judged)
    out["judge_cost"] = sum(j.get("judge_cost", 0.0) for j in judged)
    out["judge_errors"] = sum(len(j.get("errors", [])) for j in judged)
    scores = [headline(r) for r in graded] + [0.0] * len(failed)
    out["quality"] = _mean(scores)
    out["quality_measure"] = "judge score" if judged else "token F1"
    ok = [r for r in rows if r["ok"]]
    cost = sum(r["cost"] for r in ok)
    out["cost_mean"] = cost / len(ok) if ok else None
    out["latency_p50_s"] = percentile([r["seconds"] for r in ok], 50)
    # Quality per dollar: summed quality (answers weighted by their score) per $ spent answering them.
    out["quality_per_dollar"] = sum(s for s in scores if s is not None) / cost if cost > 0 else None
    return out


def quality_section(rows: Sequence[dict[str, Any]], targets: Sequence[str]) -> dict[str, Any] | None:
    """Quality per target and per question type, and each router against always using one engine."""
    if not any(r.get("grade") for r in rows):
        return None
    per_target = {t: quality_of([r for r in rows if r["engine"] == t]) for t in targets}
    types = sorted({str(r["question_type"]) for r in rows if r.get("question_type")})
    per_type = {t: {qt: quality_of([r for r in rows if r["engine"] == t and r.get("question_type") == qt])
                    for qt in types} for t in targets}
    versus: dict[str, dict[str, Any]] = {}
    for router in ("router", "keyword-router"):
        if router not in targets:
            continue
        versus[router] = {b: paired_quality(rows, router, b) for b in ("local", "global", "drift", "basic", "router")
                          if b in targets and b != router}
    return {"per_target": per_target, "per_type": per_type, "types": types, "versus": versus}


def paired_quality(rows: Sequence[dict[str, Any]], target: str, baseline: str) -> dict[str, Any] | None:
    """`target` against `baseline` on the (query, repeat) pairs both ran: quality and cost, side by side."""
    base = {(r["query_id"], r["repeat"]): r for r in rows if r["engine"] == baseline}
    pairs = [(r, base[(r["query_id"], r["repeat"])]) for r in rows
             if r["engine"] == target and (r["query_id"], r["repeat"]) in base]
    if not pairs:
        return None
    mine, theirs = quality_of([a for a, _ in pairs]), quality_of([b for _, b in pairs])
    return {"pairs": len(pairs), "quality": mine["quality"], "baseline_quality": theirs["quality"],
            "cost_mean": mine["cost_mean"], "baseline_cost_mean": theirs["cost_mean"],
            "latency_p50_s": mine["latency_p50_s"], "baseline_latency_p50_s": theirs["latency_p50_s"]}
