"""GraphRAG 3.3.0's side of `benchmarks/scale.py`, run by the Python of a separate virtualenv.

    python3 -m venv /work/venv-graphrag && /work/venv-graphrag/bin/pip install graphrag==3.3.0
    /work/venv-graphrag/bin/python benchmarks/scale_graphrag.py /tmp/scale-idx/synthetic-100000 20

Imports nothing from graphroute (GraphRAG is a peer, never a dependency). Measures, in this process:
- load: reading the parquet tables with pandas and GraphRAG's query-side adapters
  (`read_indexer_entities/relationships/text_units/covariates/reports/communities`), then building
  the global context builder (`GlobalCommunityContext`), i.e. what its query engines do at start-up;
- global batch build: `GlobalCommunityContext.build_context` for one question (default settings);
- local and basic context builds are not measured: GraphRAG maps the question to entities / text
  units through embeddings only, and the synthetic indexes carry no embedding vectors;
- peak RSS (`ru_maxrss`).
Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path


def main() -> None:
    path, n_queries = Path(sys.argv[1]), int(sys.argv[2])
    import pandas as pd
    from graphrag.query.indexer_adapters import (
        read_indexer_communities,
        read_indexer_covariates,
        read_indexer_entities,
        read_indexer_relationships,
        read_indexer_reports,
        read_indexer_text_units,
    )
    from graphrag.query.structured_search.global_search.community_context import GlobalCommunityContext

    out: dict[str, object] = {"note": "local/basic need embeddings (none in synthetic indexes)", "queries": n_queries}
    started = time.perf_counter()
    tables = {name: pd.read_parquet(path / f"{name}.parquet") for name in (
        "entities", "relationships", "text_units", "communities", "community_reports", "covariates")}  # fmt: skip
    entities = read_indexer_entities(tables["entities"], tables["communities"], community_level=None)
    read_indexer_relationships(tables["relationships"])
    read_indexer_text_units(tables["text_units"])
    read_indexer_covariates(tables["covariates"])
    reports = read_indexer_reports(tables["community_reports"], tables["communities"], community_level=None)
    communities = read_indexer_communities(tables["communities"], tables["community_reports"])
    builder = GlobalCommunityContext(community_reports=reports, communities=communities, entities=entities)
    out["load_s"] = time.perf_counter() - started
    started = time.perf_counter()
    result = asyncio.run(builder.build_context("What are the main themes of the archive?"))
    out["global_build_s"] = time.perf_counter() - started
    out["global_batches"] = len(result.context_chunks) if isinstance(result.context_chunks, list) else 1
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_avg_1m"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
