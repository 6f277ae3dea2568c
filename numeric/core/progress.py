"""Progress lines on stderr for long work (silent when disabled)."""

from __future__ import annotations

import sys
import time


class Progress:
    """Prints ``label i/n (elapsed)`` lines to stderr, at most every ``every`` seconds.

    >>> p = Progress("training", 3, enabled=False)
    >>> p.update(1)
    """

    def __init__(self, label: str, total: int, *, enabled: bool = True, every: float = 0.5):
        self.label, self.total, self.enabled, self.every = label, total, enabled, every
        self.start = time.perf_counter()
        self._last = -float("inf")

    def update(self, i: int, extra: str = "") -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if i < self.total and now - self._last < self.every:
            return
        self._last = now
        tail = f" {extra}" if extra else ""
        print(f"  {self.label} {i}/{self.total} ({now - self.start:.1f}s){tail}", file=sys.stderr, flush=True)
