"""Pausing Python's cycle collector around work that allocates many long-lived objects and makes no reference
cycles (an answer store's add, discovery's row per file): each full collection re-traverses every object alive,
so the collections alone grow with the square of the work. Reference counting still frees everything as usual."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
