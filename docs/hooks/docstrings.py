"""A griffe extension (``extensions:`` of the python handler in ``mkdocs.yml``): the package's
docstrings, written for ``doctest`` and Sphinx-style roles, as Markdown for the API pages.

* a doctest block (``>>>`` lines and their output, up to a blank line) becomes a fenced ``pycon``
  block, without its ``# doctest:`` directives (in Markdown a bare ``>>>`` would open nested quotes);
* ``:class:`~a.b.C``` and the other roles become inline code (``C`` with ``~``, else ``a.b.C``);
* ````x```` becomes ```x```, and a paragraph ending in ``::`` ends in ``:`` (its indented block is
  code in Markdown too).

>>> to_markdown("See :func:`~pkg.mod.f` and ``x``::\\n\\n>>> f(1)  # doctest: +SKIP\\n2\\n").splitlines()
['See `f` and `x`:', '', '```pycon', '>>> f(1)', '2', '```']
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+?)`")
_LITERAL = re.compile(r"``(.+?)``")
_DIRECTIVE = re.compile(r"\s+#\s*doctest:.*$")


def _role(m: re.Match[str]) -> str:
    target = m.group(2).strip()
    return f"`{target.rsplit('.', 1)[-1] if m.group(1) else target}`"


def _doctests(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        if line.lstrip().startswith(">>>") and indent < 4:  # deeper: already a code block
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(_DIRECTIVE.sub("", lines[i][indent:]) if lines[i][indent:].startswith((">>>", "..."))
                             else lines[i][indent:])
                i += 1
            pad = " " * indent
            out += [f"{pad}```pycon", *(pad + b for b in block), f"{pad}```"]
            continue
        out.append(line)
        i += 1
    return out


def to_markdown(text: str) -> str:
    """The docstring ``text`` as Markdown (see the module's docstring)."""
    lines = _doctests(text.splitlines())
    fenced = False
    for k, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = _LITERAL.sub(lambda m: f"`{m.group(1)}`", _ROLE.sub(_role, line))
        lines[k] = line[:-1] if line.endswith("::") and not line.endswith(":::") else line
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


class DoctestMarkdown(griffe.Extension):
    """Rewrite every object's docstring with :func:`to_markdown` once griffe has read it."""

    def on_object(self, *, obj: Any, loader: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
