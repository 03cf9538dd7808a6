"""PNG charts of a benchmark report (matplotlib, Agg backend: no display needed).

matplotlib is the `charts` extra (`pip install 'graphroute[charts]'`), not a runtime dependency: it is
imported when a chart is drawn, and a missing one is `ChartsUnavailable` saying what to install.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

CHARTS_EXTRA = "pip install 'graphroute[charts]'"


class ChartsUnavailable(RuntimeError):
    """matplotlib is not installed: charts are not drawn."""


def pyplot() -> ModuleType:
    """`matplotlib.pyplot` on the headless Agg backend, or `ChartsUnavailable` naming the extra to install."""
    try:
        import matplotlib
    except ImportError:
        raise ChartsUnavailable(f"charts need matplotlib, which is not installed ({CHARTS_EXTRA})") from None
    matplotlib.use("Agg")  # before pyplot: benchmarks run headless (CI, ssh)
    import matplotlib.pyplot as plt

    return plt

COLORS = {"local": "#1f77b4", "global": "#d62728", "drift": "#9467bd", "basic": "#7f7f7f", "router": "#2ca02c"}


def latency_vs_cost(report: dict[str, Any], path: Path) -> Path | None:
    """One point per engine: p50 latency (x, whisker to p95) against mean cost per query (y)."""
    points = [(e, s) for e, s in report["summary"].items() if s["ok"]]
    if not points:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    placed = [(e, s["latency_p50_s"], s["cost_mean"] * 1000) for e, s in points]
    for (engine, p50, cost), (_, s) in zip(placed, points, strict=True):
        p95 = s["latency_p95_s"]
        color = COLORS.get(engine, "#333333")
        ax.errorbar([p50], [cost], xerr=[[0.0], [max(0.0, p95 - p50)]], fmt="o", color=color, capsize=4,
                    markersize=8, label=engine)
    for engine, offset in label_offsets(placed).items():
        _, p50, cost = next(p for p in placed if p[0] == engine)
        ax.annotate(engine, (p50, cost), textcoords="offset points", xytext=offset, fontsize=9)
    ax.set_xlabel("latency per question, s (dot p50, whisker to p95)")
    ax.set_ylabel("cost per 1,000 questions, $")
    ax.set_title(f"Latency vs cost per engine ({report['model']['spec']})")
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def label_offsets(points: list[tuple[str, float, float]]) -> dict[str, tuple[int, int]]:
    """Label offsets (points) so labels of nearby dots do not overlap: points close to an earlier one (within
    8 % of each axis' range) get their label stacked below it instead of the default up-right spot."""
    xs = [p[1] for p in points] or [0.0]
    ys = [p[2] for p in points] or [0.0]
    span_x, span_y = (max(xs) or 1.0), (max(ys) or 1.0)
    out: dict[str, tuple[int, int]] = {}
    taken: list[tuple[float, float, int]] = []
    for engine, x, y in sorted(points, key=lambda p: (p[2], p[1])):
        near = [t for t in taken if abs(t[0] - x) < 0.08 * span_x and abs(t[1] - y) < 0.08 * span_y]
        slot = len(near)
        out[engine] = (6, 6 + 12 * slot)
        taken.append((x, y, slot))
    return out


def cost_per_query(report: dict[str, Any], path: Path) -> Path | None:
    """Distribution of the cost of each question, per engine (box plot over successful runs)."""
    engines = list(report["summary"])
    data = [[r["cost"] * 1000 for r in report["rows"] if r["engine"] == e and r["ok"]] for e in engines]
    kept = [(e, d) for e, d in zip(engines, data, strict=True) if d]
    if not kept:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    box = ax.boxplot([d for _, d in kept], patch_artist=True, showmeans=True)
    ax.set_xticks(range(1, len(kept) + 1), [e for e, _ in kept])
    for patch, (engine, _) in zip(box["boxes"], kept, strict=True):
        patch.set_facecolor(COLORS.get(engine, "#cccccc"))
        patch.set_alpha(0.5)
    ax.set_ylabel("cost per 1,000 questions, $")
    ax.set_title(f"Cost per 1,000 questions, spread over the questions ({report['model']['spec']}; "
                 "triangle = mean)", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def calls_by_stage(report: dict[str, Any], path: Path) -> Path | None:
    """Mean model calls per question, stacked by stage, per engine: where each engine spends its calls."""
    engines = [e for e, s in report["summary"].items() if s["ok"]]
    stage_means: dict[str, dict[str, float]] = {}
    for engine in engines:
        rows = [r for r in report["rows"] if r["engine"] == engine and r["ok"]]
        for r in rows:
            for stage, u in r["usage"]["stages"].items():
                stage_means.setdefault(stage, {}).setdefault(engine, 0.0)
                stage_means[stage][engine] += u["llm_calls"] / len(rows)
    stages = [s for s, per in stage_means.items() if any(per.values())]
    if not stages:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    bottom = [0.0] * len(engines)
    for stage in stages:
        values = [stage_means[stage].get(e, 0.0) for e in engines]
        ax.bar(engines, values, bottom=bottom, label=stage)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("model calls per question (mean)")
    ax.set_title("Model calls by stage")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_charts(report: dict[str, Any], out_dir: Path) -> list[str]:
    """Write every chart that has data; returns file names relative to `out_dir`."""
    made = [
        latency_vs_cost(report, out_dir / "latency_vs_cost.png"),
        cost_per_query(report, out_dir / "cost_per_query.png"),
        calls_by_stage(report, out_dir / "calls_by_stage.png"),
    ]
    return [p.name for p in made if p is not None]
