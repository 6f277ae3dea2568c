"""MkDocs hooks of the documentation site (``hooks:`` in ``mkdocs.yml``).

* **The checkout's package.** The placeholders below import ``coupled_curvature`` from the checkout's
  ``src/`` (first on the search path), as mkdocstrings reads it (``paths: [src]`` in ``mkdocs.yml``),
  not whichever copy is installed.
* **Pages filled from the package**, so that they cannot drift from it. A page marks the place with
  an HTML comment:

  - ``<!-- ccurv:theorems -->``: the registry's statements T1–T14 (``coupled_curvature.theorems``);
  - ``<!-- ccurv:cli -->``: the ``--help`` of every ``ccurv`` command, as the parser prints it;
  - ``<!-- ccurv:settings -->``: the run settings every entry point takes, with default, flag and meaning
    (``coupled_curvature.base.run_settings.SETTINGS``);
  - ``<!-- ccurv:api-rest -->``: every name of ``coupled_curvature.__all__`` the page does not
    document yet, as one more ``:::`` entry each (none when the page is complete).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from mkdocs.plugins import event_priority


def _checkout(config: Any) -> str:
    return os.path.dirname(os.path.abspath(config.config_file_path))


@event_priority(100)  # before anything below imports the package
def on_config(config: Any) -> Any:
    src = os.path.join(_checkout(config), "src")
    if src not in sys.path:
        sys.path.insert(0, src)  # the placeholders below import the checkout's package
    return config


@contextlib.contextmanager
def _columns(n: int) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(n)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def theorems_markdown() -> str:
    """One section per theorem of the registry: id, title, statement."""
    from coupled_curvature.theorems import THEOREMS

    return "\n".join(f"### {t.id} · {t.title}\n\n{t.statement}\n" for t in THEOREMS.values())


def _commands(parser: argparse.ArgumentParser, prefix: list[str]) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield [*prefix, name], sub
                yield from _commands(sub, [*prefix, name])


def cli_markdown() -> str:
    """Every command's ``--help`` (at 90 columns), sub-commands included."""
    from coupled_curvature.cli import build_parser

    out = []
    with _columns(90):
        parser = build_parser()
        for path, sub in _commands(parser, []):
            level = "##" if len(path) == 1 else "###"
            out.append(f"{level} ccurv {' '.join(path)}\n\n```text\n{sub.format_help().rstrip()}\n```\n")
    return "\n".join(out)


def settings_markdown() -> str:
    """The run settings as a table: name, default, ``ccurv`` flag, meaning."""
    from coupled_curvature.base.run_settings import SETTINGS

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = [f"| `{s.name}` | `{s.default!r}` | {f'`{s.flag}`' if s.flag else '(Python only)'} | {cell(s.help)} |"
            for s in SETTINGS]
    return "\n".join(["| setting | default | flag | meaning |", "|---|---|---|---|", *rows]) + "\n"


def api_rest(markdown: str) -> str:
    """``:::`` entries for the names of ``coupled_curvature.__all__`` that ``markdown`` does not document."""
    import coupled_curvature
    from coupled_curvature.base import errors

    documented = {m.group(1).rsplit(".", 1)[-1] for m in re.finditer(r"^::: ([\w.]+)", markdown, re.M)}
    missing = [n for n in coupled_curvature.__all__ if n not in documented]
    if not missing:
        return ""
    lazy: dict[str, str] = getattr(coupled_curvature, "_LAZY", {})
    entries = [f"::: {lazy.get(n, errors.__name__ if hasattr(errors, n) else 'coupled_curvature')}.{n}\n"
               for n in missing]
    return "## Other public names\n\n" + "\n".join(entries)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    fills = {
        "theorems": theorems_markdown,
        "cli": cli_markdown,
        "settings": settings_markdown,
        "api-rest": lambda: api_rest(markdown),
    }
    for key, make in fills.items():
        mark = f"<!-- ccurv:{key} -->"
        if mark in markdown:
            markdown = markdown.replace(mark, make())
    return markdown
