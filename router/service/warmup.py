"""What `graphroute serve` builds before it listens, so its first questions cost what later ones do."""

from __future__ import annotations

from router.router import Router


def warm_for_service(router: Router, rows: int) -> None:
    """The router's own warm-up (engines, models, the tables linking and building read), then up to `rows`
    rendered local-context rows (`shared_context.local_warmup.warm_local_rows`): a question about an entity no
    earlier question touched otherwise renders and counts its rows itself, about a quarter of its CPU. A
    long-lived service pays this once; a one-question process would not get it back."""
    from shared_context.local_context import LocalContextBuilder
    from shared_context.local_warmup import warm_local_rows

    router.warm_up()
    builder = router.engine("local").builder
    if rows > 0 and isinstance(builder, LocalContextBuilder) and len(router.index.entities):
        warm_local_rows(builder, rows)  # a custom builder has no row cache
