"""Ctrl-C and SIGTERM during a build: stop at once (the staging folder is then discarded), except while
the finished index is being swapped into place: a signal then is ignored, since the build is complete.

Why our own handler: `asyncio.run` turns SIGINT into a task cancellation, which only lands at the next
`await`, and most build steps are long synchronous loops, so Ctrl-C used to wait until the build ended.
Handlers are only installed from the main thread and are restored afterwards.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class BuildInterrupted(KeyboardInterrupt):
    """The build was stopped by a signal; nothing was changed in the index folder."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise BuildInterrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT/SIGTERM raise `BuildInterrupted` wherever the build is (between Python bytecodes)."""
    with _handlers(_raise):
        yield


@contextmanager
def signals_ignored() -> Iterator[None]:
    """SIGINT/SIGTERM do nothing inside the block (the swap of a finished index, which must not be cut)."""
    with _handlers(signal.SIG_IGN):
        yield


@contextmanager
def _handlers(handler: Any) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the caller's own handling applies
        return
    previous = {s: signal.getsignal(s) for s in _SIGNALS}
    for s in _SIGNALS:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
