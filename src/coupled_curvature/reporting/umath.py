"""Unicode mathematics (the registry's notation: ``wᵀHw``, ``W_{l+1}``, ``c⁻²``, ``‖g‖²``) as LaTeX and MathML.

A text such as a theorem statement is split into words; runs of words that are mathematics
(they hold a mathematical symbol, a sub/superscript, or are a lone variable letter) become
inline math, the rest stays text. :func:`normalise` first turns SymPy-style spellings that
reach descriptions (``c**(-2)``, ``c^-k``, ``sigma``) into the Unicode notation.

>>> normalise("RQ'/RQ = c**(-2) and c^-k σ")
"RQ'/RQ = c⁻² and c⁻ᵏ σ"
>>> math_latex("wᵀHw/‖g‖²")
'w^{\\\\top}Hw/\\\\|g\\\\|^{2}'
>>> [kind for kind, _ in split_math("D is unchanged for all w ≠ 0")]
['math', 'text', 'math']
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import TypeVar

__all__ = ["normalise", "split_math", "math_latex", "math_mathml", "text_latex", "text_html"]

_SUP = {"⁻": "-", "ᵀ": "T", "⁺": "+", "²": "2", "³": "3", "⁴": "4", "¹": "1", "⁰": "0", "ᵏ": "k", "ⁿ": "n",
        "ᵢ": "i"}
_TO_SUP = {"-": "⁻", "2": "²", "3": "³", "4": "⁴", "1": "¹", "0": "⁰", "k": "ᵏ", "n": "ⁿ", "+": "⁺", "T": "ᵀ"}
_GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "varepsilon", "θ": "theta", "κ": "kappa",
          "λ": "lambda", "μ": "mu", "π": "pi", "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "varphi", "ψ": "psi",
          "η": "eta", "ω": "omega", "ξ": "xi", "Δ": "Delta", "Π": "Pi", "Σ": "Sigma", "Φ": "Phi", "Ω": "Omega"}
_OPS = {"→": r"\to", "≤": r"\le", "≥": r"\ge", "≠": r"\ne", "≈": r"\approx", "⊗": r"\otimes", "·": r"\cdot",
        "‖": r"\|", "∇": r"\nabla", "∂": r"\partial", "ℓ": r"\ell", "∘": r"\circ", "⋊": r"\rtimes", "∈": r"\in",
        "∉": r"\notin", "−": "-", "×": r"\times", "⟨": r"\langle", "⟩": r"\rangle", "∠": r"\angle",
        "ℝ": r"\mathbb{R}", "∥": r"\parallel", "…": r"\dots", "½": r"\tfrac{1}{2}", "√": r"\surd", "∞": r"\infty",
        "±": r"\pm", "⇔": r"\Leftrightarrow", "⇒": r"\Rightarrow", "∀": r"\forall", "≡": r"\equiv",
        "⊥": r"\perp", "⊤": r"\top", "ʹ": r"\prime", "′": "'", "’": "'", "∑": r"\sum", "⌈": r"\lceil", "⌉": r"\rceil",
        "%": r"\%", "#": r"\#", "&": r"\&", "~": r"\sim", "°": r"^{\circ}", "✓": r"\checkmark", "—": "-"}
_FUNCS = {"diag", "det", "log", "tr", "vec", "max", "min", "cos", "sin", "exp", "sinh", "GL", "CO", "RQ", "rank",
          "Tr", "adj", "sign", "ReLU", "span", "ker", "Var", "KL", "sgn", "argmax", "pinv", "Abs", "dps", "rtol"}
_MATH_CHARS = set(_SUP) | set(_GREEK) | set(_OPS) - {"—", "’", "%", "#", "&", "~", "°", "✓"} | set("_^=<>+|")
_SPELLED = {"sigma": "σ", "lambda": "λ", "tau": "τ", "theta": "θ", "alpha": "α", "rho": "ρ", "kappa": "κ",
            "delta": "δ", "phi": "φ", "gamma": "γ", "epsilon": "ε", "ell": "ℓ", "dell": "∂ℓ", "d2ell": "∂²ℓ"}


_ACCENT = {"û": r"\hat{u}", "ŵ": r"\hat{w}", "ĝ": r"\hat{g}", "ê": r"\hat{e}", "θ̂": r"\hat{\theta}"}
_DIGITS = "0123456789"  # not str.isdigit, which holds for ² too

K = TypeVar("K")


def _sup(s: str) -> str:
    return "".join(_TO_SUP[c] for c in s) if all(c in _TO_SUP for c in s) else "^{" + s + "}"


def normalise(s: str) -> str:
    """SymPy/ASCII spellings in a description as Unicode mathematics (powers, Greek names)."""
    s = re.sub(r"\*\*\((-?[0-9A-Za-z]+)\)", lambda m: _sup(m.group(1)), s)
    s = re.sub(r"\*\*\((-?)(\d+)\*([a-z])\)", lambda m: _sup(m.group(1) + m.group(2) + m.group(3)), s)
    s = re.sub(r"\*\*(-?[0-9A-Za-z]+)", lambda m: _sup(m.group(1)), s)
    s = re.sub(r"\^\((-?[0-9a-z]+)\)", lambda m: _sup(m.group(1)), s)
    s = re.sub(r"\^(-?[0-9a-zT]{1,2})(?![\w{])", lambda m: _sup(m.group(1)), s)
    s = re.sub(r"\b(" + "|".join(sorted(_SPELLED, key=len, reverse=True)) + r")\b", lambda m: _SPELLED[m.group(1)], s)
    s = s.replace("<=>", "⇔").replace("=>", "⇒").replace("->", "→").replace("<=", "≤").replace(">=", "≥").replace("!=", "≠")
    s = re.sub(r"(?<=\w)\*(?=\w)", "·", s)
    return s.replace("= True", "holds").replace("= False", "fails")


#: function names that are mathematics standing alone (``det M``); not ``log``, ``max``: prose says "log axes"
_NAMED = {"det", "tr", "diag", "adj", "vec", "exp", "Tr"}

_ENGLISH = set("a an as at be by do if in is it no of on or so to up we the and for all are has its not one two "
               "per but any may use set can ray via own net new too now see how say out off was each with this that "
               "from then into onto when also only else both even more most such than them they".split())


def _core(w: str) -> str:
    core = w.strip(",.;:")
    while core.startswith("(") and core.count("(") > core.count(")"):
        core = core[1:]
    while core.endswith(")") and core.count(")") > core.count("("):
        core = core[:-1]
    return core


def _is_math_word(w: str) -> bool:
    core = _core(w)
    if (not core or core in _ENGLISH or core in ("—", "–") or (len(core) > 1 and core.lower() in _ENGLISH) or core in ("I", "i.e", "e.g")
            or re.fullmatch(r"\(?T\d+\)?|'?[a-z]{2,}(_[a-z]{2,})+'?", core)):
        return False
    if any(c in _MATH_CHARS for c in core):
        return True
    if core in _NAMED:
        return True
    if ("(" in core or ")" in core) and not re.fullmatch(r"[A-Za-z]*\([A-Za-z0-9,]*\)[A-Za-z0-9]*", core):
        parts = [x for x in re.split(r"[()/]", core) if x]  # tr((H, δI)), L(L: math when each piece is
        return bool(parts) and all(x in _FUNCS or _is_math_word(x) for x in parts)
    if len(core) <= 3 and not re.fullmatch(r"[A-Z]?[a-z]{2,3}|[A-Z]{2,3}s?|[a-z]+-", core):
        return True  # a lone variable, a short product such as pP or Aw, a number, (i)
    return bool(re.fullmatch(r"[A-Za-z]*\([A-Za-z0-9,]*\)[A-Za-z0-9]*|[0-9]+[A-Za-z]?|[A-Za-z]+'+", core))


def split_math(text: str) -> list[tuple[str, str]]:
    """``[(kind, piece)]`` with ``kind`` ``"text"`` or ``"math"``; pieces joined give ``text`` back."""
    words = [w for w in re.split(r"( +)", text) if w]
    flags = [(not w.isspace()) and _is_math_word(w) for w in words]
    for i, w in enumerate(words):  # a space between two math words belongs to the math
        if w.isspace() and 0 < i < len(words) - 1 and flags[i - 1] and flags[i + 1]:
            flags[i] = True
    out: list[tuple[str, str]] = []
    for f, piece in _joined(zip(flags, words)):
        if not f:
            out.append(("text", piece))
            continue
        at = 0
        for cut in sorted(_text_parens(piece)) + [len(piece)]:
            out += _trimmed(piece[at:cut]) + ([("text", piece[cut])] if cut < len(piece) else [])
            at = cut + 1
    return _joined(out)


#: characters after which `` (`` continues a formula (``= (A⁻ᵀg)``) rather than opening an aside
_OPERATORS = set("=+-−·×/<>≤≥≠≈→⇔⇒∈∉⊗∘:,;(|")


def _text_parens(run: str) -> set[int]:
    """Positions of the parentheses of a math run that belong to the text: those that do not pair
    up inside the run (an aside that starts in the math and ends in prose) and both of an aside's
    pair, `` (`` after an operand (``wᵀg = kL (L differentiable at w)``).

    >>> sorted(_text_parens("T (T")), sorted(_text_parens("Q ≥ 0 (n = 2)")), sorted(_text_parens("c⁻²(|λ| − m)"))
    ([2], [6, 12], [])
    """
    out, stack = set(), []
    masked = re.sub(r"\([^()\[\]]*\]|\[[^()\[\]]*\)", lambda m: "x" * len(m.group(0)), run)  # (0, 1], [0, 1)
    for i, ch in enumerate(masked):
        if ch == "(":
            stack.append(i)
        elif ch == ")":
            if not stack:
                out.add(i)
                continue
            j = stack.pop()
            before = run[:j].rstrip()
            inner = run[j + 1:i]  # (n = 2), (L convex); not (M⁻¹)_jj or (λ⁻¹uuᵀ), products
            aside = re.search(r"[=,;]", inner) or any(w in _ENGLISH or (len(w) > 3 and w not in _FUNCS)
                                                      for w in re.findall(r"[a-z]{2,}", inner))
            if j and run[j - 1] == " " and before and before[-1] not in _OPERATORS and aside:
                out |= {i, j}
    return out | set(stack)


def _trimmed(piece: str) -> list[tuple[str, str]]:
    """A math fragment with its outer spaces and punctuation given to the text."""
    core = piece.strip(" ,.;:")
    if not core:
        return [("text", piece)] if piece else []
    lead, trail = piece[:piece.index(core)], piece[piece.index(core) + len(core):]
    return [("text", lead)] * bool(lead) + [("math", core)] + [("text", trail)] * bool(trail)


def _joined(runs: Iterable[tuple[K, str]]) -> list[tuple[K, str]]:
    """``(kind, piece)`` runs with neighbours of the same kind joined into one.

    >>> _joined([(True, "a"), (True, " b"), (False, ",")])
    [(True, 'a b'), (False, ',')]
    """
    out: list[tuple[K, str]] = []
    for kind, piece in runs:
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + piece)
        else:
            out.append((kind, piece))
    return out


def _closed(s: str, i: int) -> tuple[str, int] | None:
    """What the bracket ``{`` or ``(`` at ``s[i]`` encloses and the index after its match; ``None`` if unmatched."""
    depth, signs = 0, {s[i]: 1, {"{": "}", "(": ")"}[s[i]]: -1}
    for j in range(i, len(s)):
        depth += signs.get(s[j], 0)
        if depth == 0:
            return s[i + 1:j], j + 1
    return None


def _group(s: str, i: int) -> tuple[str, int]:
    """The script argument starting at ``s[i]``: ``{…}`` or a run of letters/digits/primes."""
    if i < len(s) and s[i] in "{(":  # ^(2-2k): the parenthesised exponent is the group, without its parentheses
        inner = _closed(s, i)
        if inner is not None:
            return inner
        if s[i] == "{":  # an unclosed {: the rest of the run
            return s[i + 1:], len(s)
    if i < len(s) and s[i] in "-−" and i + 1 < len(s) and s[i + 1] not in " )":  # ^-k, ^−(N+1): the sign and its group
        arg, j = _group(s, i + 1)
        return "-" + arg, j
    j = i
    if i < len(s) and s[i] in _DIGITS:
        while j < len(s) and s[j] in _DIGITS:
            j += 1
        return s[i:j], j
    upper = i < len(s) and s[i].isupper()
    while j < len(s) and (s[j].isalpha() or s[j] in "ℓ") and s[j] not in _SUP and s[j].isupper() == upper:
        j += 1
    if j == i and i < len(s):
        j = i + 1
    return s[i:j], j


#: a snake_case name with two or more underscores (a parameter or module name), typeset upright as one word
_SNAKE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+){2,}")


def _tokens(s: str) -> list[tuple[str, str]]:
    """Lex one math run: ``(kind, value)`` with kind in id, fn, num, op, sup, sub."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c in _SUP:
            j = i
            while j < len(s) and s[j] in _SUP:
                j += 1
            out.append(("sup", "".join(_SUP[x] for x in s[i:j])))
            i = j
        elif c in "_^":
            arg, i = _group(s, i + 1)
            out.append(("sub" if c == "_" else "sup", arg))
        elif c.isascii() and c.isalpha() and (snake := _SNAKE.match(s, i)):  # a code name, q_proj_weight: not two subscripts
            j = snake.end()
            out.append(("name", s[i:j]))
            i = j
        elif c.isascii() and c.isalpha():
            j = i
            while j < len(s) and s[j].isascii() and s[j].isalpha():
                j += 1
            word = s[i:j]
            if word in _FUNCS or (len(word) > 3 and word.isalpha() and word.islower()):
                out.append(("fn", word))
            else:
                out += [("id", x) for x in word]
            i = j
        elif c in _DIGITS:
            j = i
            while j < len(s) and (s[j] in _DIGITS or (s[j] == "." and j + 1 < len(s) and s[j + 1] in _DIGITS)):
                j += 1
            out.append(("num", s[i:j]))
            i = j
        elif c in _GREEK:
            out.append(("id", c))
            i += 1
        elif c in _ACCENT:  # û: the letter with a hat
            out.append(("id", c))
            i += 1
        elif c == " ":
            out.append(("space", " "))
            i += 1
        elif c in "'′":  # a prime is a superscript: merged with its neighbours (D⁺′, H′⁺)
            out.append(("sup", "ʹ"))
            i += 1
        else:
            out.append(("op", c))
            i += 1
    merged: list[tuple[str, str]] = []
    for kind, v in out:
        if kind == "sup" and merged and merged[-1][0] == "sup":
            merged[-1] = ("sup", merged[-1][1] + v)
        else:
            merged.append((kind, v))
    return merged


def math_latex(s: str) -> str:
    """One Unicode math run as LaTeX math (no ``$``)."""
    out: list[str] = []
    toks = _tokens(s)
    for n, (kind, v) in enumerate(toks):
        if kind == "space":  # LaTeX spaces operators itself; keep a gap only between two operands
            prev = toks[n - 1][0] if n else ""
            nxt = toks[n + 1][0] if n + 1 < len(toks) else ""
            if not ({prev, nxt} <= {"id", "num", "fn", "name", "sup", "sub"}) or (nxt in ("sup", "sub")):
                continue
        if kind in ("sup", "sub"):
            transpose = kind == "sup" and "T" in v and v.strip("-+Tʹ") == ""
            inner = math_latex(v.replace("T", "⊤") if transpose else v)
            if kind == "sup" and len(out) >= 2 and out[-1].startswith("_{") and out[-2].startswith("^{"):
                out[-2] = out[-2][:-1] + " " + inner + "}"  # x^a_b^c: one superscript
            else:
                out.append(("^" if kind == "sup" else "_") + "{" + inner + "}")
        elif kind == "name":
            out.append(rf"\mathrm{{{v.replace('_', chr(92) + '_')}}}")
        elif kind == "fn":
            out.append({"log": r"\log ", "det": r"\det ", "max": r"\max ", "min": r"\min ", "cos": r"\cos ",
                        "exp": r"\exp ", "sin": r"\sin ", "sinh": r"\sinh ", "ker": r"\ker "}.get(v, rf"\mathrm{{{v}}}"))
        elif kind == "id" and v in _GREEK:
            out.append("\\" + _GREEK[v] + " ")
        elif kind == "id" and v in _ACCENT:
            out.append(_ACCENT[v])
        elif kind == "space":
            out.append(r"\ ")
        elif kind == "op" and v == ",":
            out.append(r",\allowbreak ")  # a long run may break after a comma, as in text
        elif kind == "op":
            out.append(_OPS.get(v, {"{": r"\{", "}": r"\}", "$": r"\$"}.get(v, v if v.isascii() else "?")))
            if out[-1].startswith("\\") and out[-1][-1].isalpha():
                out[-1] += " "
        else:
            out.append(v)
    return "".join(out).replace(r"^{-\top}", r"^{-\top}").replace(" }", "}").strip()


_MO = {"−": "−", "-": "−", "*": "·", "ʹ": "′"}


#: MathML of the tokens that stand alone: function names, identifiers, numbers, spaces
_LEAVES = {"fn": lambda v: f'<mi mathvariant="normal">{html.escape(v)}</mi>',
           "name": lambda v: f'<mi mathvariant="normal">{html.escape(v)}</mi>', "id": lambda v: f"<mi>{html.escape(v)}</mi>",
           "num": lambda v: f"<mn>{v}</mn>", "space": lambda v: '<mspace width="0.25em"/>'}


def _mathml_items(s: str) -> list[str]:
    items: list[str] = []
    for kind, v in _tokens(s):
        if kind in ("sup", "sub"):
            arg = "".join(_mathml_items(v.replace("T", "⊤") if kind == "sup" and v.strip("-+Tʹ") == "" else v))
            base = items.pop() if items else "<mrow></mrow>"
            tag = "msup" if kind == "sup" else "msub"
            if kind == "sup" and base.startswith("<msub>"):  # x_i^k: one msubsup
                base_inner = base[len("<msub>"):-len("</msub>")]
                items.append(f"<msubsup>{base_inner}<mrow>{arg}</mrow></msubsup>")
            else:
                items.append(f"<{tag}>{base}<mrow>{arg}</mrow></{tag}>")
        elif kind in _LEAVES:
            items.append(_LEAVES[kind](v))
        else:
            items.append(f"<mo>{html.escape(_MO.get(v, v))}</mo>")
    return items


def math_mathml(s: str, display: str = "inline") -> str:
    """One Unicode math run as a ``<math>`` element (presentation MathML)."""
    return (f'<math xmlns="http://www.w3.org/1998/Math/MathML" display="{display}"><mrow>'
            + "".join(_mathml_items(s)) + "</mrow></math>")


def text_latex(text: str, escape) -> str:
    """Mixed text: math runs as ``$…$``, the rest through ``escape`` (the renderer's text escaper)."""
    return "".join(f"${math_latex(p)}$" if k == "math" else escape(p) for k, p in split_math(normalise(text)))


def _html_math(run: str) -> str:
    """A math run as MathML; a long one as one ``<math>`` per word, so that the line can wrap."""
    if len(run) <= 32:
        return math_mathml(run)
    return " ".join(math_mathml(w) for w in run.split(" ") if w)


def text_html(text: str) -> str:
    """Mixed text: math runs as inline MathML, the rest HTML-escaped."""
    return "".join(_html_math(p) if k == "math" else html.escape(p) for k, p in split_math(normalise(text)))
