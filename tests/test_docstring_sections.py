"""Every public function has its docstring in one style, the one the documentation site renders
(mkdocstrings with ``docstring_style: google``): ``Args:`` naming each parameter of its signature (``**settings``
for the run settings), ``Returns:``, ``Raises:`` and a ``See also:`` note; and griffe, which reads them for the
site, finds nothing to warn about. The public functions are those of ``coupled_curvature.__all__`` and
``coupled_curvature.numeric.__all__``.

The check runs on griffe's own reading of the sources (it is how the site sees them); griffe comes with the docs
extra, so without it the test skips. Controls: a docstring without a section, with a parameter the signature lacks,
or missing one it has, is caught.
"""

from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path

import pytest

griffe = pytest.importorskip("griffe", reason="griffe comes with the docs extra (mkdocstrings-python)")

SRC = Path(__file__).resolve().parents[1] / "src"
pytestmark = pytest.mark.skipif(not (SRC / "coupled_curvature").is_dir(), reason="needs the checkout's src/")


def public_functions() -> dict[str, str]:
    """Public name -> the dotted path of the function it is (inside ``coupled_curvature``)."""
    import coupled_curvature
    import coupled_curvature.numeric as numeric

    out = {}
    for package in (coupled_curvature, numeric):
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.isfunction(obj):
                out[name] = f"{obj.__module__}.{obj.__qualname__}"
    return out


def _documented_name(p: griffe.Parameter) -> str:
    prefix = {griffe.ParameterKind.var_keyword: "**", griffe.ParameterKind.var_positional: "*"}.get(p.kind, "")
    return prefix + p.name


#: the parser options of mkdocs.yml (``docstring_options``): a Returns section is one value described in prose
PARSER_OPTIONS = {"returns_multiple_items": False, "returns_named_value": False}

#: what a type reads like (names, dots, brackets, commas, ``|``), and not an article read off prose
_TYPE = re.compile(r"(?!(?:A|An|The)$)[\w.\[\], |]*")

#: public functions that raise nothing of their own, so have no ``Raises:`` section (with the reason)
NO_RAISES = {"derive_all": "takes no argument; a failed step is recorded in Derivation.ok, not raised"}


def problems(fn: griffe.Function) -> list[str]:
    """What the function's docstring lacks or gets wrong (empty: it is in the house style)."""
    if fn.docstring is None:
        return ["no docstring"]
    warnings: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if "No type or annotation" not in text:  # the annotations live in the signature
                warnings.append(text)

    log = logging.getLogger("griffe")
    handler = Catch()
    log.addHandler(handler)
    try:
        parsed = griffe.Docstring(fn.docstring.value, parent=fn).parse(griffe.Parser.google, **PARSER_OPTIONS)
    finally:
        log.removeHandler(handler)
    kinds = {s.kind.value for s in parsed}
    out = [f"griffe: {w}" for w in warnings]
    wanted = [_documented_name(p) for p in fn.parameters if p.name not in ("self", "cls")]
    documented = [d.name for s in parsed if s.kind.value == "parameters" for d in s.value]
    if wanted and "parameters" not in kinds:
        out.append("no Args: section")
    missing = [n for n in wanted if n not in documented and n.lstrip("*") not in documented]
    extra = [n for n in documented if n not in wanted and f"**{n}" not in wanted and f"*{n}" not in wanted]
    out += [f"Args: misses {n}" for n in missing] + [f"Args: names {n}, not in the signature" for n in extra]
    for kind, title in (("returns", "Returns:"), ("raises", "Raises:")):
        if kind not in kinds and not (kind == "raises" and fn.name in NO_RAISES):
            out.append(f"no {title} section")
    for s in parsed:  # griffe reads a Returns section's first line up to its first colon as the type
        if s.kind.value == "returns" and s.value and not _TYPE.fullmatch(str(s.value[0].annotation or "")):
            out.append(f"Returns: its first line is read as the type {str(s.value[0].annotation)!r}")
    if not any(s.kind.value == "admonition" and s.title.lower() == "see also" for s in parsed):
        out.append("no See also: note")
    return out


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    return griffe.load("coupled_curvature", search_paths=[str(SRC)])


def _function(package: griffe.Module, path: str) -> griffe.Function:
    return package[path.removeprefix("coupled_curvature.")]


def test_the_parser_options_are_those_of_the_site():
    config = (SRC.parent / "mkdocs.yml").read_text(encoding="utf-8")
    for key, value in PARSER_OPTIONS.items():
        assert f"{key}: {str(value).lower()}" in config, key


def test_there_are_public_functions_to_check():
    found = public_functions()
    assert {"diagnose", "spectral_profile", "certify", "qk_transform", "witness"} <= set(found), sorted(found)


@pytest.mark.parametrize("name", sorted(public_functions()))
def test_public_function_docstring_has_its_sections(package, name):
    path = public_functions()[name]
    assert problems(_function(package, path)) == [], path


def _fake(doc: str) -> griffe.Function:
    params = griffe.Parameters(griffe.Parameter("x", annotation="int", kind=griffe.ParameterKind.positional_or_keyword),
                               griffe.Parameter("settings", kind=griffe.ParameterKind.var_keyword))
    fn = griffe.Function("f", parameters=params)
    fn.docstring = griffe.Docstring(doc, parent=fn)
    return fn


GOOD = """Add one.

Args:
    x: a number.
    **settings: the run settings.

Returns:
    ``x + 1``.

Raises:
    InvalidInputError: ``x`` is not an int.

See also:
    ``g``.
"""


def test_the_check_passes_a_docstring_in_the_style():
    assert problems(_fake(GOOD)) == []


@pytest.mark.parametrize("cut, expected", [
    ("Returns:\n    ``x + 1``.\n\n", "no Returns: section"),
    ("Raises:\n    InvalidInputError: ``x`` is not an int.\n\n", "no Raises: section"),
    ("See also:\n    ``g``.\n", "no See also: note"),
    ("    x: a number.\n", "Args: misses x"),
])
def test_the_check_fails_on_a_missing_part(cut, expected):
    assert cut in GOOD
    assert expected in problems(_fake(GOOD.replace(cut, "")))


def test_the_check_fails_on_returns_prose_read_as_a_type():
    found = problems(_fake(GOOD.replace("    ``x + 1``.", "    A :class:`int`: ``x + 1``.")))
    assert any(p.startswith("Returns: its first line is read as the type") for p in found)
    assert problems(_fake(GOOD.replace("    ``x + 1``.", "    int: ``x + 1``."))) == []


def test_the_check_fails_on_a_parameter_the_signature_lacks():
    found = problems(_fake(GOOD.replace("    x: a number.\n", "    x: a number.\n    y: another.\n")))
    assert "Args: names y, not in the signature" in found
    assert any("'y' does not appear in the function signature" in p for p in found)


@pytest.mark.parametrize("name", ["diagnose", "spectral_profile", "cutoff_sensitivity"])
def test_the_run_settings_entry_names_every_setting(package, name):
    """A function that takes the run settings as ``**settings`` names each of them in its ``Args:`` entry, so
    the entry cannot drift from :data:`~coupled_curvature.base.run_settings.SETTINGS` (a new setting fails here
    until it is named)."""
    from coupled_curvature.base.run_settings import SETTINGS

    fn = _function(package, public_functions()[name])
    parsed = griffe.Docstring(fn.docstring.value, parent=fn).parse(griffe.Parser.google, **PARSER_OPTIONS)
    entry = next(d.description for s in parsed if s.kind.value == "parameters" for d in s.value
                 if d.name.lstrip("*") == "settings")
    assert [s.name for s in SETTINGS if f"``{s.name}``" not in entry] == []
