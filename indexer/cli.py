"""`graphroute index INPUT... --out INDEX`: the argparse entry the router's CLI mounts as a sub-command.

`build_arg_parser(parser)` adds the arguments to a given (sub)parser; `cli_main(argv)` parses and runs,
returning a process exit code (0 built/updated/no-op, 2 bad input or settings, 1 model failure, 130/143 on
Ctrl-C/SIGTERM, with the previous index untouched). Errors are one readable line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from indexer.config import IndexerConfig, IndexerError


def build_arg_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(
        prog="graphroute index", description="Build a GraphRAG-v3 index from documents: a folder, a file or a glob."
    )
    p.add_argument(
        "input",
        metavar="INPUT",
        nargs="+",
        help="a folder of documents (read recursively), a single file, or a glob pattern such as 'docs/**/*.md' "
        "(quoted); several may be given. Formats: .txt .md .html .pdf .docx, and .csv .jsonl .parquet with one "
        "document per row (--text-column names the text column)",
    )
    p.add_argument("--out", metavar="INDEX", required=True, help="index folder to create or update")
    p.add_argument("--chunk-size", type=int, default=1200, help="tokens per text unit (default 1200)")
    p.add_argument("--overlap", type=int, default=100, help="tokens shared by consecutive text units (default 100)")
    p.add_argument("--encoding", default="o200k_base", help="tiktoken encoding (default o200k_base)")
    p.add_argument("--max-gleanings", type=int, default=1, help="extra extraction rounds with a model (default 1)")
    p.add_argument("--claims", action="store_true", help="also extract claims (covariates) with a model")
    p.add_argument("--text-column", default="text", help="table inputs: column holding the text (default text)")
    p.add_argument("--title-column", help="table inputs: column holding the title (default title, else FILE#ROW)")
    p.add_argument("--id-column", help="table inputs: column holding a unique document id (default: hash of the text)")
    p.add_argument("--no-progress", action="store_true", help="hide progress lines and bars")
    p.add_argument(
        "--refit-embedder",
        action="store_true",
        help="fit the offline embedder anew on an update (every text is embedded again); by default an index keeps its embedder",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="build into a non-empty folder that is not a graphroute index (its files are kept, never replaced)",
    )
    p.add_argument(
        "--model",
        choices=("offline", "openai"),
        default="offline",
        help="offline: no model (default); openai: the OpenAI-compatible endpoint from graphroute.toml / OPENAI_* env",
    )
    return p


def _openai_models(out_dir: Path) -> tuple[Any, Any]:
    """Chat model (+ embedder when one is configured) from the model configuration, with the call cache on."""
    from engines.models.cache import ModelCallCache
    from engines.models.config import default_cache_dir, load_models_config
    from engines.models.openai_backend import OpenAIChatModel, OpenAIEmbedder

    cfg = load_models_config()
    if cfg.chat.offline:
        raise IndexerError(
            "--model openai needs an endpoint: set OPENAI_API_KEY (and optionally OPENAI_BASE_URL) or [models.chat] "
            "in graphroute.toml"
        )
    # Without a configured cache each index folder gets one, so re-running the build costs nothing. It lives
    # in the user's cache folder, not in the index: an index folder holds data files only (SECURITY.md).
    key = hashlib.sha256(str(out_dir.resolve()).encode()).hexdigest()[:16]
    default = default_cache_dir(os.environ) / "index-calls" / f"{key}.sqlite"
    cache = ModelCallCache(cfg.cache.path if cfg.cache.enabled and cfg.cache.path else default)
    chat = OpenAIChatModel(cfg.chat, cfg.prices, cache=cache)
    embedder = None if cfg.embedding.offline else OpenAIEmbedder(cfg.embedding, cfg.prices, cache=cache)
    return chat, embedder


def run_from_args(args: argparse.Namespace) -> int:
    from engines.models.errors import ModelError
    from indexer.pipeline import build_index
    from indexer.signals import BuildInterrupted
    from indexer.tabular import ColumnOptions

    try:
        config = IndexerConfig(
            chunk_size=args.chunk_size,
            chunk_overlap=args.overlap,
            encoding=args.encoding,
            max_gleanings=args.max_gleanings,
            claims=args.claims,
        )
        model = embedder = None
        if args.model == "openai":
            model, embedder = _openai_models(Path(args.out))
        elif args.claims:
            print("note: --claims needs a model (--model openai); offline builds have no claims", file=sys.stderr)
        report = build_index(
            args.input,
            args.out,
            config=config,
            model=model,
            embedder=embedder,
            progress=not args.no_progress,
            force=args.force,
            refit_embedder=args.refit_embedder,
            columns=ColumnOptions(text=args.text_column, title=args.title_column, id=args.id_column),
        )
    except IndexerError as exc:
        print(f"graphroute index: error: {exc}", file=sys.stderr)
        return 2
    except ModelError as exc:
        print(f"graphroute index: model error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, BuildInterrupted) else 2
        print(f"graphroute index: interrupted; {args.out} was left as it was before this build", file=sys.stderr)
        return 128 + signum
    print(report.summary())
    return 0


def cli_main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    return run_from_args(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli_main())
