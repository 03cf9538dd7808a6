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
        "latency_p95_s": percentile(lat, 95),
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


def router_savings(rows: Sequence[dict[str, Any]], baseline: str) -> dict[str, Any] | None:
    """Router cost and time against always using `baseline`, on the (query, repeat) pairs both answered."""
    by_key = {(r["query_id"], r["repeat"]): r for r in rows if r["engine"] == baseline and r["ok"]}
    pairs = [(r, by_key[(r["query_id"], r["repeat"])]) for r in rows
             if r["engine"] == "router" and r["ok"] and (r["query_id"], r["repeat"]) in by_key]
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


def router_section(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Everything about the router: route mix, quality against labels, savings, cost per correct route."""
    routed = [r for r in rows if r["engine"] == "router"]
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
    quality = routing_quality([(r["label"], r["route"]) for r in labelled]) if labelled else None
    section: dict[str, Any] = {
        "route_mix": dict(sorted(mix.items())),
        "engine_used_mix": dict(sorted(used.items())),
        "escalations": sum(1 for r in ok if r.get("escalations")),
        "quality": quality,
        "savings": {b: router_savings(rows, b) for b in ("global", "drift")},
    }
    if quality and quality["n"]:
        labelled_ids = {r["query_id"] for r in labelled}
        labelled_rows = [r for r in ok if r["query_id"] in labelled_ids]
        repeats = len({r["repeat"] for r in labelled_rows}) or 1
        cost = sum(r["cost"] for r in labelled_rows) / repeats
        section["cost_per_correct_route"] = cost / quality["correct"] if quality["correct"] else None
        section["labelled_cost_per_repeat"] = cost
    return section
