"""The LAPACK fast route cannot fail silently: it is active on a normal scipy wheel, accepts the
``blas_int`` typedef scipy's generator moves to, refuses 64-bit integers, and any fallback warns once,
says why in :func:`fast_route_status`, and still gives the ``eigh`` values."""

import ctypes
import importlib

import numpy as np
import pytest
import torch

from coupled_curvature.numeric.linalg import lapack_binding, pinv
from coupled_curvature.numeric.linalg.pinv import (
    FastRouteUnavailableWarning,
    fast_route_status,
    pinv_quadratic_form,
    tridiagonal_spectrum,
)
from tests.numeric.test_pinv import N_FAST, RTOL, check, matrix

ORIGINAL = lapack_binding._capsule_signature
MANGLED = {"blas": "__pyx_t_5scipy_6linalg_11cython_blas_", "lapack": "__pyx_t_5scipy_6linalg_13cython_lapack_"}


@pytest.fixture
def rebind(monkeypatch):
    """``monkeypatch`` whose patches are undone and the binding rebound at teardown."""
    yield monkeypatch
    monkeypatch.undo()
    lapack_binding.bind()
    assert fast_route_status().active


def spelled(int_spelling):
    """A ``_capsule_signature`` that names every integer argument ``int_spelling`` (``{mod}`` → the
    Cython module prefix), as scipy's generator would."""

    def signature(module, fn):
        prefix = MANGLED["blas" if module.__name__.endswith("cython_blas") else "lapack"]
        return ORIGINAL(module, fn).replace("int *", int_spelling.format(mod=prefix) + " *")

    return signature


def test_fast_route_is_active_on_this_machine():
    """CI runs a normal scipy wheel: the two-stage route must be bound there, or D⁺ costs ~7× more."""
    status = fast_route_status()
    assert status.active, status.reason
    assert status.reason is None and status.int_type in ("int", "blas_int")
    assert set(status.routines) == set(lapack_binding.SPECS) - {"dcopy"}
    assert lapack_binding._scipy_has_ilp64() is not True  # wheels are LP64 (has ilp64: False)


def test_current_signatures_are_the_ones_checked():
    text = ORIGINAL(importlib.import_module("scipy.linalg.cython_lapack"), "dsbtrd")
    assert lapack_binding._check_signature("dsbtrd", text, lapack_binding.SPECS["dsbtrd"][1]) in ("int", "blas_int")


@pytest.mark.parametrize("arg, base", [
    ("int *", "int"),
    ("__pyx_t_5scipy_6linalg_11cython_blas_d *", "d"),
    ("__pyx_t_5scipy_6linalg_13cython_lapack_blas_int *", "blas_int"),
    ("int64_t *", "int64_t"),
    ("int", None),
])
def test_base_type_demangles_cython_typedefs(arg, base):
    assert lapack_binding._base_type(arg) == base


@pytest.mark.parametrize("spelling", ["{mod}blas_int", "blas_int", "int32_t"])
def test_blas_int_signature_is_accepted(rebind, spelling, tridiagonal_only):
    rebind.setattr(lapack_binding, "_capsule_signature", spelled(spelling))
    status = lapack_binding.bind()
    assert status.active, status.reason
    assert status.int_type == ("int32_t" if spelling == "int32_t" else "blas_int")
    rng = np.random.default_rng(3)
    H, w = matrix("indefinite", N_FAST, rng), rng.standard_normal(N_FAST)
    check(H, w, pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), RTOL), N_FAST)


def test_blas_int_is_refused_when_scipy_reports_ilp64(rebind):
    rebind.setattr(lapack_binding, "_capsule_signature", spelled("{mod}blas_int"))
    rebind.setattr(lapack_binding, "_scipy_has_ilp64", lambda: True)
    status = lapack_binding.bind()
    assert not status.active and status.routines == ()
    assert "'blas_int'" in status.reason and "ILP64" in status.reason and "32-bit" in status.reason


@pytest.mark.parametrize("spelling", ["int64_t", "long long"])
def test_64_bit_integer_signature_is_refused(rebind, spelling):
    rebind.setattr(lapack_binding, "_capsule_signature", spelled(spelling))
    status = lapack_binding.bind()
    assert not status.active and "64-bit integer (ILP64)" in status.reason, status.reason


def _fake_dcopy(bits):
    """A dcopy that reads its count as a ``bits``-wide integer, as an LP64 or ILP64 library would."""
    kind = ctypes.c_int32 if bits == 32 else ctypes.c_int64

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    def dcopy(n, x, incx, y, incy):
        if ctypes.cast(n, ctypes.POINTER(kind))[0] > 0:
            ctypes.cast(y, ctypes.POINTER(ctypes.c_double))[0] = ctypes.cast(x, ctypes.POINTER(ctypes.c_double))[0]

    return dcopy


def test_probe_refuses_a_library_reading_64_bit_integers():
    lapack_binding._probe_int_width(_fake_dcopy(32))
    with pytest.raises(ImportError, match="64-bit integers"):
        lapack_binding._probe_int_width(_fake_dcopy(64))


def test_mismatching_signature_falls_back_warns_once_and_agrees_with_eigh(rebind):
    def dropped(module, fn):  # dsbtrd loses its last argument
        text = ORIGINAL(module, fn)
        return text.rsplit(", ", 1)[0] + ")" if fn == "dsbtrd" else text

    rebind.setattr(lapack_binding, "_capsule_signature", dropped)
    status = lapack_binding.bind()
    assert not status.active and "dsbtrd" in status.reason and "11 arguments, want 12" in status.reason
    assert fast_route_status() == status
    rng = np.random.default_rng(5)
    cases = [(matrix(kind, N_FAST, rng), rng.standard_normal(N_FAST)) for kind in ("psd", "clustered")]
    with pytest.warns(FastRouteUnavailableWarning) as record:
        forms = [pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), RTOL) for H, w in cases]
    ours = [r for r in record if issubclass(r.category, FastRouteUnavailableWarning)]
    assert len(ours) == 1  # once, although two large blocks fell back
    message = str(ours[0].message)
    assert "dsbtrd" in message and "7x the flops" in message and "fast_route_status" in message
    for (H, w), form in zip(cases, forms):
        check(H, w, form, N_FAST)  # the eigh fallback still matches numpy's eigh to the usual tolerance
    with pytest.raises(RuntimeError, match="unavailable .*dsbtrd"):
        tridiagonal_spectrum(torch.from_numpy(cases[0][0]), torch.from_numpy(cases[0][1]))


@pytest.fixture
def tridiagonal_only(monkeypatch):
    monkeypatch.setattr(pinv, "eigh_spectrum", lambda *_: pytest.fail("eigh route used"))
