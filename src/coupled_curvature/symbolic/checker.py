"""Independent re-checker of witnesses and certificates, using only ``fractions.Fraction``.

Imports nothing from the rest of ``symbolic/`` (nor SymPy): it takes plain data (lists of
ints / strings such as ``"3/4"``) and recomputes everything itself.

* :func:`check_witness` -- ``D = (wᵀHw/wᵀw)/‖g‖²``, ``w' = Aw``, ``g' = A⁻ᵀg``,
  ``H' = A⁻ᵀHA⁻¹``; accepts iff the stated ``factor`` equals ``D'/D`` and ``!= 1``.
* :func:`check_certificate` -- T4 necessity for size ``n``: builds the identity
  ``(wᵀMw)(gᵀNg) - (wᵀw)(gᵀg)`` (``M``, ``N`` symmetric unknowns), takes its coefficients in
  ``(w, g)`` as hypotheses ``h``, and accepts iff each target equals ``Σ c_h·h`` exactly and the
  targets say ``M = M_11·I``.
* :func:`check_pinv_witness` -- Penrose conditions for the stated pseudo-inverses, and
  ``w'ᵀH'⁺w' != wᵀH⁺w``.

>>> check_witness({"A": [[1, 0], [0, 2]], "w": [1, 0], "g": [0, 1], "H": [[1, 0], [0, 0]],
...                "factor": "4"})
True
"""
from fractions import Fraction as F


def _m(a):
    return [[F(x) for x in r] for r in a]


def _mul(a, b):
    return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def _tr(a):
    return [list(r) for r in zip(*a)]


def _inv(a):
    """Gauss-Jordan inverse over the rationals; ValueError if singular."""
    n = len(a)
    m = [list(r) + [F(int(i == j)) for j in range(n)] for i, r in enumerate(_m(a))]
    for c in range(n):
        p = next((r for r in range(c, n) if m[r][c] != 0), None)
        if p is None:
            raise ValueError("singular matrix")
        m[c], m[p] = m[p], m[c]
        m[c] = [x / m[c][c] for x in m[c]]
        for r in range(n):
            if r != c and m[r][c] != 0:
                m[r] = [x - m[r][c] * y for x, y in zip(m[r], m[c])]
    return [r[n:] for r in m]


def _D(w, g, H):
    wHw, ww, gg = _mul(_mul(_tr(w), H), w)[0][0], _mul(_tr(w), w)[0][0], _mul(_tr(g), g)[0][0]
    return wHw / ww / gg


def check_witness(data):
    """Recompute ``D'/D`` from ``A, w, g, H``; True iff it equals ``data['factor']`` and ``!= 1``."""
    try:
        A, H = _m(data["A"]), _m(data["H"])
        w, g = [[F(x)] for x in data["w"]], [[F(x)] for x in data["g"]]
        n = len(A)
        if n < 2 or any(len(r) != n for r in A + H) or len(w) != n or len(g) != n or H != _tr(H):
            return False
        if _mul(_mul(_tr(w), H), w)[0][0] == 0 or all(x[0] == 0 for x in g):
            return False
        Ai = _inv(A)
        AiT = _tr(Ai)
        f = _D(_mul(A, w), _mul(AiT, g), _mul(_mul(AiT, H), Ai)) / _D(w, g, H)
        return f == F(data["factor"]) and f != 1
    except (KeyError, ValueError, ZeroDivisionError, TypeError, IndexError):
        return False


# -- polynomials: dict {exponent tuple: Fraction}; variables M_ij, N_ij (i<=j), w_i, g_i --
def _padd(p, q, s=1):
    r = dict(p)
    for e, c in q.items():
        r[e] = r.get(e, 0) + s * c
    return {e: c for e, c in r.items() if c != 0}


def _pmul(p, q):
    r = {}
    for e1, c1 in p.items():
        for e2, c2 in q.items():
            e = tuple(a + b for a, b in zip(e1, e2))
            r[e] = r.get(e, 0) + c1 * c2
    return {e: c for e, c in r.items() if c != 0}


def check_certificate(data):
    """Re-verify the T4 necessity certificate (see module docstring); True iff valid."""
    try:
        n = int(data["n"])
        pairs = [(i, j) for i in range(n) for j in range(i, n)]
        names = [f"M{i}{j}" for i, j in pairs] + [f"N{i}{j}" for i, j in pairs]
        names += [f"w{i}" for i in range(n)] + [f"g{i}" for i in range(n)]
        V = len(names)
        var = {s: {tuple(int(t == k) for t in range(V)): F(1)} for k, s in enumerate(names)}
        one = {(0,) * V: F(1)}

        def form(X, v):  # vᵀXv for symmetric X
            p = {}
            for i in range(n):
                for j in range(n):
                    p = _padd(p, _pmul(var[f"{X}{min(i, j)}{max(i, j)}"], _pmul(var[f"{v}{i}"], var[f"{v}{j}"])))
            return p

        sq = lambda v: {k: c for i in range(n) for k, c in _pmul(var[f"{v}{i}"], var[f"{v}{i}"]).items()}
        ident = _padd(_pmul(form("M", "w"), form("N", "g")), _pmul(sq("w"), sq("g")), -1)
        k0 = V - 2 * n  # coefficients in (w, g): hypotheses are polynomials in M, N
        hyps = {}
        for e, c in ident.items():
            hyps.setdefault(e[k0:], {})[e[:k0] + (0,) * (2 * n)] = c

        def parse(p):  # [[coeff, {var: power}], ...]
            r = {}
            for c, mono in p:
                t = dict(one)
                for s, k in mono.items():
                    for _ in range(int(k)):
                        t = _pmul(t, var[s])
                r = _padd(r, {e: x * F(c) for e, x in t.items()})
            return r

        want = {f"M{i}{j}" for i, j in pairs if i != j} | {f"M{i}{i}-M00" for i in range(1, n)}
        if {t["name"] for t in data["targets"]} != want:
            return False
        for t in data["targets"]:
            tgt = parse(t["target"])
            name = t["name"]
            exp = _padd(var[name[:3]], var["M00"], -1) if "-" in name else var[name]
            if tgt != exp:
                return False
            comb = {}
            for key, cof in t["combination"]:
                comb = _padd(comb, _pmul(parse(cof), hyps[tuple(int(x) for x in key)]))
            if comb != tgt:
                return False
        return True
    except (KeyError, ValueError, TypeError, IndexError, ZeroDivisionError):
        return False


def check_pinv_witness(data):
    """Penrose-check ``Hp = H⁺`` and ``Hp2 = (A⁻ᵀHA⁻¹)⁺``; True iff ``wᵀH⁺w != w'ᵀH'⁺w'``
    and these equal the stated ``before``/``after`` values."""
    try:
        A, H, Hp, Hp2 = (_m(data[k]) for k in ("A", "H", "Hp", "Hp2"))
        w = [[F(x)] for x in data["w"]]
        Ai = _inv(A)
        H2 = _mul(_mul(_tr(Ai), H), Ai)
        for X, P in ((H, Hp), (H2, Hp2)):
            XP, PX = _mul(X, P), _mul(P, X)
            if _mul(XP, X) != X or _mul(PX, P) != P or XP != _tr(XP) or PX != _tr(PX):
                return False
        w2 = _mul(A, w)
        before, after = _mul(_mul(_tr(w), Hp), w)[0][0], _mul(_mul(_tr(w2), Hp2), w2)[0][0]
        return before == F(data["before"]) and after == F(data["after"]) and before != after
    except (KeyError, ValueError, TypeError, IndexError, ZeroDivisionError):
        return False
