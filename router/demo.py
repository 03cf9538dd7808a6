"""`make demo`: build the sample index if it is missing, then ask three routed questions, all offline.

The three questions are chosen so that the router sends one to each engine: a fact about one named
thing (local), a question about the whole collection (global), and one that connects several entities
over time (DRIFT). Nothing is hard-coded about the answers: they come from the index.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

SAMPLE_CORPUS = Path(__file__).resolve().parents[1] / "indexer" / "sample_corpus"
QUESTIONS = (
    "Who leads the Tidewater Turbine Programme?",
    "What are the main themes across all these documents?",
    "How did the 2021 River Tane flood affect the TT-2 tidal turbine and its partnership with "
    "Haixing Marine Engineering?",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphroute-demo", description=__doc__)
    parser.add_argument("--index", default=".graphroute-cache/demo_index", help="where the sample index lives")
    parser.add_argument("--corpus", default=str(SAMPLE_CORPUS), help="folder of documents to index")
    args = parser.parse_args(argv)
    console = Console()

    from indexer import build_index
    from router.cli import render_answer
    from router.router import Router

    index_dir = Path(args.index)
    if not (index_dir / "entities.parquet").exists():
        console.print(Rule(f"indexing {args.corpus} (offline) → {index_dir}"))
        t0 = time.perf_counter()
        report = build_index(args.corpus, index_dir, progress=True)
        console.print(f"built in {time.perf_counter() - t0:.1f}s\n{report.summary()}")
    else:
        console.print(f"using the existing sample index at {index_dir} (`make clean-demo` rebuilds it)")

    router = Router.from_index(index_dir)
    console.print(f"models: {router.models.describe()}")
    for question in QUESTIONS:
        console.print(Rule(question))
        answer = router.ask(question)
        render_answer(console, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
