"""A wall-clock limit for one document's parse in this process, so a pathological file cannot stall a serial
ingest (workers=1). Best effort: the handler runs only between Python bytecodes (C code that never returns
holds it off) and Python drops an exception raised inside a finalizer or weakref callback (the alarm can land
in one). The parse pool (parsers.parse_pool), the default, kills a worker instead, which nothing holds off."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class ParseTimeout(BaseException):
    """Raised from SIGALRM. A BaseException, so parser code's `except Exception` cannot swallow it."""


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise ParseTimeout in the block after `seconds`.

    SIGALRM only works in a POSIX main thread; elsewhere (worker threads) the block runs unlimited. A
    real-time timer someone else armed (pytest-timeout, say) is respected: if it fires first it is left
    alone, otherwise it is re-armed with its remaining time afterwards.
    """
    previous_handler = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    usable = (
        seconds is not None
        and seconds > 0
        and previous_handler is not None  # None: a handler installed outside Python, which we could not restore
        and threading.current_thread() is threading.main_thread()
    )
    previous_delay, previous_interval = signal.getitimer(signal.ITIMER_REAL) if usable else (0.0, 0.0)
    if seconds is None or not usable or (previous_delay and previous_delay <= seconds):
        yield
        return

    def on_alarm(signum, frame):
        raise ParseTimeout

    started = time.monotonic()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay:
            remaining = max(previous_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_interval)
