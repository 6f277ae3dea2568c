"""BLAS/LAPACK at pointer level through scipy's Cython capsules, for the two-stage tridiagonal route.

``scipy.linalg.cython_blas``/``cython_lapack`` export every routine as a ``PyCapsule`` whose name is
its C signature, e.g. ``void (char *, int *, __pyx_t_5scipy_6linalg_11cython_blas_d *, …)``. We read
those names, check each argument against the kinds our calls pass (``char *``, a 32-bit integer
pointer, ``double *``) and bind the pointers with :mod:`ctypes`. Integers may be spelled ``int``,
``int32_t`` or a Cython typedef (scipy ≥ 1.18 writes ``blas_int``, which is ``int`` or ``int64_t``
depending on the build); a typedef is accepted when scipy reports no ILP64 BLAS, and every binding
is then probed at run time (:func:`_probe_int_width`): a 64-bit integer ABI is refused with a
reason, never called with 32-bit pointers. (numpy's own BLAS may be ILP64 — numpy 2 wheels ship
``scipy_openblas64`` — but the capsules call scipy's library, so only scipy's status matters.)

Speed (``python bench/bench_inverse.py --compare-dsytrd``, two shared cores, load 4–5): the public
one-stage ``scipy.linalg.lapack.dsytrd`` route took 0.90× the two-stage time at n = 2000 but 1.71×
at n = 4000 (half its flops are memory-bound ``dsymv`` on a matrix larger than cache; an earlier
run at load 3–10 gave 0.79× and 2.30×), so this binding stays.
When it cannot be bound, :func:`fast_route_status` says why, and the first fallback to a full
``eigh`` (about 7× the flops) warns once with :class:`FastRouteUnavailableWarning`.
"""

from __future__ import annotations

import ctypes
import re
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _ctypes import CFuncPtr  # ctypes._CFuncPtr at run time; typeshed names it only here

#: argument kinds per routine: 'c' char*, 'i' integer*, 'd' double*
SPECS: dict[str, tuple[str, str]] = {
    "dcopy": ("blas", "ididi"),
    "dsymv": ("blas", "ciddididdi"),
    "dsyr2": ("blas", "ciddididi"),
    "dsymm": ("blas", "cciiddididdi"),
    "dsyr2k": ("blas", "cciiddididdi"),
    "dgemm": ("blas", "cciiiddididdi"),
    "dtrmm": ("blas", "cccciiddidi"),
    "dgeqrf": ("lapack", "iididdii"),
    "dlarft": ("lapack", "cciididdi"),
    "dsbtrd": ("lapack", "cciididddidi"),
}
_INT_BITS: dict[str, int] = {"int": 8 * ctypes.sizeof(ctypes.c_int), "int32_t": 32, "int64_t": 64, "long long": 64,
             "long": 8 * ctypes.sizeof(ctypes.c_long), "npy_int64": 64, "npy_int32": 32}


class FastRouteUnavailableWarning(RuntimeWarning):
    """The two-stage LAPACK route is unavailable; large blocks fall back to a full ``eigh``."""


@dataclass(frozen=True)
class FastRouteStatus:
    """Whether the two-stage tridiagonal route is bound: ``active``, else ``reason``; the bound
    ``routines`` and the integer type their capsule signatures name (``int``, ``blas_int``…)."""

    active: bool
    reason: str | None
    routines: tuple[str, ...]
    int_type: str | None


ROUTINES: dict[str, CFuncPtr] | None = None
STATUS = FastRouteStatus(False, "not bound yet", (), None)
_warned = False


def fast_route_status() -> FastRouteStatus:
    """Whether ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²`` of large blocks takes the two-stage route
    (``≈ 4/3·n³`` flops) or falls back to a full ``eigh`` (``≈ 9n³``), and why.

    >>> s = fast_route_status()
    >>> s.active, s.reason, s.routines[-1], s.int_type   # a normal scipy wheel
    (True, None, 'dsbtrd', 'int')
    """
    return STATUS


def warn_fallback() -> None:
    """Warn once per process (until :func:`bind` runs again) that a large block falls back to ``eigh``."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            f"coupled_curvature: the two-stage LAPACK route is unavailable ({STATUS.reason}); blocks of "
            "at least pinv.FAST_MIN_SIZE rows fall back to a full torch.linalg.eigh, about 7x the flops "
            "(values unchanged). See coupled_curvature.numeric.linalg.pinv.fast_route_status().",
            FastRouteUnavailableWarning, stacklevel=3)


def _capsule_signature(module: ModuleType, fn: str) -> str:
    """The C signature scipy's capsule for ``fn`` carries as its name (what :func:`_check_signature` reads)."""
    return _capsule_name(module.__pyx_capi__[fn]).decode()


def _capsule_name(capsule: object) -> bytes:
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return name(capsule)


def _base_type(arg: str) -> str | None:
    """``'int *'`` → ``'int'``; a Cython-mangled typedef ``__pyx_t_5scipy_6linalg_11cython_blas_d *`` → ``'d'``."""
    arg = arg.strip()
    if not arg.endswith("*") or arg.endswith("**"):
        return None
    base = arg[:-1].strip()
    if base.startswith("__pyx_t_"):
        rest = base[len("__pyx_t_"):]
        while (m := re.match(r"(\d+)", rest)) and len(rest) > len(m.group(1)) + int(m.group(1)):
            rest = rest[len(m.group(1)) + int(m.group(1)):].lstrip("_")  # one module component
        return rest
    return base


def _scipy_has_ilp64() -> bool | None:
    """scipy's build-time ILP64 status (``show_config``'s ``has ilp64``), ``None`` if unrecorded."""
    try:
        import scipy

        deps = scipy.__config__.CONFIG["Build Dependencies"]
        flags = [deps[k].get("has ilp64") for k in ("blas", "lapack") if k in deps]
    except (AttributeError, KeyError, TypeError):
        return None
    import scipy.linalg.blas as sblas

    flags.append(getattr(sblas, "HAS_ILP64", None))
    known = [bool(f) for f in flags if f is not None]
    return any(known) if known else None


def _int_bits(base: str) -> tuple[int | None, str | None]:
    """Width of an integer spelling, or ``(None, why)``; a typedef is 32-bit only in a build without ILP64."""
    if base in _INT_BITS:
        return _INT_BITS[base], None
    if not re.fullmatch(r"\w*int\w*", base):
        return None, f"{base!r} is not an integer type"
    ilp64 = _scipy_has_ilp64()
    if ilp64 is False:
        return 8 * ctypes.sizeof(ctypes.c_int), None
    return None, (f"integer typedef {base!r} with scipy ILP64 status {ilp64} (show_config 'has ilp64'): "
                  "it may be 64-bit, so 32-bit pointers are not passed")


def _check_signature(fn: str, text: str, sig: str) -> str:
    """The integer type ``text`` names, or ``ImportError`` naming the first argument that differs from ``sig``."""
    if not text.startswith("void (") or not text.endswith(")"):
        raise ImportError(f"unexpected signature for {fn}: {text}")
    args = text[len("void (") : -1].split(", ")
    if len(args) != len(sig):
        raise ImportError(f"unexpected signature for {fn} ({len(args)} arguments, want {len(sig)}): {text}")
    int_types = set()
    for arg, kind in zip(args, sig):
        base = _base_type(arg)
        if kind == "i" and base not in (None, "char", "d", "double"):
            bits, why = _int_bits(base)
            if bits != 32:
                raise ImportError(f"{fn}: {why or f'{base!r} is a {bits}-bit integer (ILP64)'}; the route "
                                  "passes 32-bit integer pointers")
            int_types.add(base)
        elif not (kind == "c" and base == "char" or kind == "d" and base in ("d", "double")):
            raise ImportError(f"unexpected argument {arg!r} of {fn}: {text}")
    if len(int_types) != 1:
        raise ImportError(f"{fn} names integer types {sorted(int_types)}, want one: {text}")
    return int_types.pop()


def _probe_int_width(dcopy: CFuncPtr) -> None:
    """Refuse a library that reads 64-bit integers. ``n`` is stored as the int32 pair ``(1, −1)``: a
    32-bit read sees 1 and copies one value; a 64-bit read sees a negative count and copies none."""
    n, inc = (ctypes.c_int32 * 2)(1, -1), (ctypes.c_int32 * 2)(1, 0)
    x, y = ctypes.c_double(1.0), ctypes.c_double(0.0)
    dcopy(n, ctypes.byref(x), inc, ctypes.byref(y), inc)
    if y.value != 1.0:
        raise ImportError("scipy's BLAS reads 64-bit integers (ILP64) although its capsules name a 32-bit type")


def bound_routines() -> dict[str, CFuncPtr]:
    """:data:`ROUTINES` for the two-stage route, which runs only where they are bound (else a ``RuntimeError``)."""
    if ROUTINES is None:
        raise RuntimeError(f"the LAPACK routines are not bound ({STATUS.reason}); the eigh route needs none")
    return ROUTINES


def bind() -> FastRouteStatus:
    """Bind every routine of :data:`SPECS` (``ROUTINES``) and set :data:`STATUS`; on any failure the
    route is off and ``STATUS.reason`` says why. Run at import; tests run it again after patching."""
    global ROUTINES, STATUS, _warned
    _warned = False
    try:
        ROUTINES, int_type = _bind_all()
        STATUS = FastRouteStatus(True, None, tuple(r for r in SPECS if r != "dcopy"), int_type)
    except Exception as exc:  # an unexpected scipy build: the eigh route is always correct
        ROUTINES, STATUS = None, FastRouteStatus(False, f"{type(exc).__name__}: {exc}", (), None)
    return STATUS


def _bind_all() -> tuple[dict[str, CFuncPtr], str]:
    import scipy.linalg.cython_blas as cblas
    import scipy.linalg.cython_lapack as clapack

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    kinds = {"c": ctypes.c_char_p, "i": ctypes.c_void_p, "d": ctypes.c_void_p}
    mods = {"blas": cblas, "lapack": clapack}
    bound: dict[str, CFuncPtr] = {}
    int_types: set[str] = set()
    for fn, (lib, sig) in SPECS.items():
        text = _capsule_signature(mods[lib], fn)
        int_types.add(_check_signature(fn, text, sig))
        capsule = mods[lib].__pyx_capi__[fn]
        bound[fn] = ctypes.CFUNCTYPE(None, *(kinds[k] for k in sig))(get(capsule, _capsule_name(capsule)))
    _probe_int_width(bound["dcopy"])
    return bound, " / ".join(sorted(int_types))


bind()
