"""Progress lines on stderr for long work (silent when disabled).

:class:`Progress` prints ``label i/n [####------] (elapsed) extra`` at most every ``every``
seconds; on a terminal the line is rewritten in place (tqdm-style, ``\\r``), elsewhere each
update is its own line. :func:`progress_enabled` turns the ``progress=None/True/False`` option
of a long call into on/off: ``None`` means on exactly when the stream is a terminal, and then
(``delay=AUTO_DELAY``) silent for the first :data:`AUTO_DELAY` seconds, so that the many short
calls a study makes print nothing.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["AUTO_DELAY", "Progress", "progress_bar", "progress_enabled"]

#: seconds an automatic (``progress=None``) progress display waits before its first line
AUTO_DELAY = 2.0

_WIDTH = 100  # terminal output stays within 100 columns
_BAR = 10


def progress_enabled(progress: object, stream: TextIO | None = None) -> bool:
    """``progress`` as on/off: ``True``/``False`` force it, ``None`` means ``stream.isatty()``.

    ``stream`` defaults to ``sys.stderr``. Anything else is an ``InvalidInputError``.

    >>> import io
    >>> progress_enabled(None, io.StringIO()), progress_enabled(True, io.StringIO()), progress_enabled(False)
    (False, True, False)
    """
    if progress is None:
        out = sys.stderr if stream is None else stream
        return bool(getattr(out, "isatty", lambda: False)())
    if not isinstance(progress, bool):
        raise InvalidInputError(f"progress must be None (auto: on when stderr is a terminal), True or False, "
                                f"got {progress!r}; pass one of them")
    return progress


class Progress:
    """Prints ``label i/n [bar] (elapsed) extra`` to stderr, at most every ``every`` seconds.

    The last step (``i == total``) always prints; nothing prints in the first ``delay`` seconds.
    :meth:`stage` prints a one-off stage line (``label: text (elapsed)``); :meth:`close` ends an
    in-place line with a newline. Lines are cut to 100 columns.

    >>> import io
    >>> out = io.StringIO()
    >>> p = Progress("diagnose", 2, stream=out, every=0.0)
    >>> p.stage("curvature"); p.update(1, "a"); p.update(2, "b"); p.close()
    >>> [line.split(" (")[0] for line in out.getvalue().splitlines()]
    ['  diagnose: curvature', '  diagnose 1/2 [#####-----]', '  diagnose 2/2 [##########]']
    >>> Progress("training", 3, enabled=False).update(1)
    >>> late = Progress("diagnose", 1, stream=out, delay=60.0); late.stage("x"); late.update(1)
    >>> out.getvalue().count("\\n")
    3
    """

    def __init__(self, label: str, total: int, *, enabled: bool = True, every: float = 0.5,
                 stream: TextIO | None = None, delay: float = 0.0):
        self.label, self.total, self.enabled, self.every, self.delay = label, total, enabled, every, delay
        self.stream = stream
        self.start = time.perf_counter()
        self._last = -float("inf")
        self._open = False  # an in-place line is showing

    def _out(self) -> TextIO:
        return sys.stderr if self.stream is None else self.stream

    def _inline(self) -> bool:
        return bool(getattr(self._out(), "isatty", lambda: False)())

    def _write(self, text: str, *, rewrite: bool) -> None:
        out, text = self._out(), text[:_WIDTH]
        if rewrite and self._inline():
            out.write("\r" + text.ljust(_WIDTH if self._open else len(text)))
            self._open = True
        else:
            if self._open:
                out.write("\n")
                self._open = False
            out.write(text + "\n")
        out.flush()

    def _quiet(self, now: float) -> bool:
        return not self.enabled or now - self.start < self.delay

    def update(self, i: int, extra: str = "") -> None:
        now = time.perf_counter()
        if self._quiet(now):
            return
        if i < self.total and now - self._last < self.every:
            return
        self._last = now
        filled = _BAR * i // self.total if self.total > 0 else _BAR
        bar = f" [{'#' * filled}{'-' * (_BAR - filled)}]"
        tail = f" {extra}" if extra else ""
        self._write(f"  {self.label} {i}/{self.total}{bar} ({now - self.start:.1f}s){tail}", rewrite=True)

    def stage(self, text: str) -> None:
        """One line ``label: text (elapsed)`` for a stage without steps to count."""
        now = time.perf_counter()
        if not self._quiet(now):
            self._write(f"  {self.label}: {text} ({now - self.start:.1f}s)", rewrite=False)

    def close(self) -> None:
        """End an in-place line (a no-op when lines are not rewritten)."""
        if self.enabled and self._open:
            self._out().write("\n")
            self._out().flush()
            self._open = False


def progress_bar(label: str, total: int, progress: bool | None) -> Progress:
    """The progress display of a long call with the ``progress=None/True/False`` option: ``total`` steps, on as
    :func:`progress_enabled` says, and with ``None`` silent for its first :data:`AUTO_DELAY` seconds.

    >>> progress_bar("certify", 4, False).enabled, progress_bar("diagnose", 4, True).delay
    (False, 0.0)
    """
    return Progress(label, total, enabled=progress_enabled(progress), delay=AUTO_DELAY if progress is None else 0.0)
