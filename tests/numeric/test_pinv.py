"""pinv_quadratic_form: the tridiagonal route against an independent numpy eigh reference."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg import pinv as pinv
from coupled_curvature.numeric.linalg.pinv import (
    FAST_MIN_SIZE,
    eigh_spectrum,
    pinv_quadratic_form,
    tridiagonal_spectrum,
)

EPS = float(np.finfo(np.float64).eps)
RTOL = 1e-10
KINDS = ["psd", "indefinite", "singular", "clustered"]
N_FAST = FAST_MIN_SIZE + FAST_MIN_SIZE // 8 + 8  # still >= FAST_MIN_SIZE after "singular" zeroes n // 10 rows


def _refuse(*_):
    raise AssertionError("eigh route used")


@pytest.fixture
def tridiagonal_only(monkeypatch):
    """Make any use of the eigh route fail, so a test exercises the tridiagonal route."""
    monkeypatch.setattr(pinv, "eigh_spectrum", _refuse)


def reference(H, w, rtol=RTOL):
    """numpy (OpenBLAS LAPACK, not torch/MKL) eigh: value, rank, cutoff, max|λ|, Σ|c_i/λ_i|."""
    lam, U = np.linalg.eigh((H + H.T) / 2)
    c = (U.T @ w) ** 2
    max_abs = np.abs(lam).max()
    keep = np.abs(lam) > rtol * max_abs
    return {
        "value": float((c[keep] / lam[keep]).sum()),
        "rank": int(keep.sum()),
        "cutoff": rtol * max_abs,
        "max_abs": max_abs,
        "min_rel": np.abs(lam[keep]).min() / max_abs,
        "abs_sum": float(np.abs(c[keep] / lam[keep]).sum()),
    }


def tolerance(ref):
    """``max(1e-10, 20εκ)`` relative (as tests/numeric/test_diagnose_reference.py), κ = 1/min kept
    relative eigenvalue; relative to ``Σ|c_i/λ_i|``, which is ``|wᵀH⁺w|`` unless signs cancel."""
    return max(1e-10 * abs(ref["value"]), 20 * EPS / ref["min_rel"] * ref["abs_sum"])




def orthogonal(n, rng):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def matrix(kind, n, rng, margin=1.5):
    """Symmetric test matrices with a known spectral structure.

    ``clustered``: clusters of eigenvalues (both signs) at 1.5–2 times the cutoff and at 0.5–0.67
    times it. Closer clusters make ``wᵀH⁺w`` sensitive to ``ε‖H‖/gap`` beyond ``κ`` (see
    :func:`test_tight_clusters_at_the_cutoff`)."""
    if kind == "singular":  # exact low rank (numerically ~ε‖H‖ null eigenvalues) plus exact zero rows
        B = rng.standard_normal((n, n // 3))
        H = B @ B.T
        dead = rng.choice(n, size=n // 10, replace=False)
        H[dead] = 0.0
        H[:, dead] = 0.0
        return H
    if kind == "psd":
        lam = np.exp(rng.uniform(np.log(1e-7), 0.0, n))
    elif kind == "indefinite":
        lam = np.exp(rng.uniform(np.log(1e-7), 0.0, n)) * rng.choice([-1.0, 1.0], n)
    else:  # clusters just above and below the cutoff, both signs, around a spread bulk
        lam = np.exp(rng.uniform(np.log(1e-5), 0.0, n)) * rng.choice([-1.0, 1.0], n)
        lam[0] = 1.0
        k = n // 8
        lam[1 : 1 + k] = RTOL * margin * (1.0 + 0.3 * rng.random(k)) * rng.choice([-1.0, 1.0], k)
        lam[1 + k : 1 + 2 * k] = RTOL / margin / (1.0 + 0.3 * rng.random(k)) * rng.choice([-1.0, 1.0], k)
    Q = orthogonal(n, rng)
    return (Q * lam) @ Q.T


def check(H, w, form, n):
    ref = reference(H, w)
    assert form.rank == ref["rank"]
    assert abs(form.max_abs_eig - ref["max_abs"]) <= 100 * EPS * ref["max_abs"]
    assert abs(form.cutoff - ref["cutoff"]) <= 100 * EPS * ref["cutoff"]
    assert abs(form.min_kept_rel_eig - ref["min_rel"]) <= 100 * n * EPS  # eigenvalues to O(nε‖H‖)
    assert abs(form.value - ref["value"]) <= tolerance(ref), (form.value, ref["value"], tolerance(ref))
    return ref


@settings(max_examples=40, deadline=None, derandomize=True)
@given(kind=st.sampled_from(KINDS), n=st.integers(24, 200), seed=st.integers(0, 10**6))
def test_fast_path_matches_numpy_eigh(kind, n, seed):
    rng = np.random.default_rng(seed)
    H, w = matrix(kind, n, rng), rng.standard_normal(n)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pinv, "FAST_MIN_SIZE", 2)  # every size takes the tridiagonal route
        mp.setattr(pinv, "eigh_spectrum", _refuse)
        form = pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), RTOL)
    check(H, w, form, n)


@pytest.mark.parametrize("kind", KINDS)
def test_fast_path_at_default_threshold(kind, tridiagonal_only):
    rng = np.random.default_rng(9)
    H, w = matrix(kind, N_FAST, rng), rng.standard_normal(N_FAST)
    check(H, w, pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), RTOL), N_FAST)


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_cutoff_is_detected(kind, tridiagonal_only):
    """Negative control: dropping the smallest kept eigenvalue moves the value by far more than
    the tolerance, so the comparison above can fail."""
    rng = np.random.default_rng(7)
    n = N_FAST
    H, w = matrix(kind, n, rng), rng.standard_normal(n)
    ref = reference(H, w)
    lam = np.linalg.eigvalsh(H)
    above = np.sort(np.abs(lam[np.abs(lam) > ref["cutoff"]]))
    wrong_rtol = (above[0] * 1.001) / ref["max_abs"]  # one more eigenvalue (or cluster) dropped
    form = pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), wrong_rtol)
    assert form.rank < ref["rank"]
    assert abs(form.value - ref["value"]) > 10 * tolerance(ref)


def test_tight_clusters_at_the_cutoff(tridiagonal_only):
    """Clusters at 1.01τ and 0.99τ: the kept set is still exactly the reference's. The value moves
    by ``≈ ε‖H‖/gap`` (gap = 0.02τ) in any eigensolver: against a 32-digit mpmath truth, numpy's,
    torch's, scipy's and this route all err by up to ~1e-3 relative (measured, n = 48, 20 seeds;
    a random ε‖H‖ perturbation alone moves it by up to 9e-4), i.e. ~20 times the κ-based bound.
    Negative control: a cutoff of 1.5τ (drops the kept cluster) leaves that tolerance."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        n = N_FAST
        H, w = matrix("clustered", n, rng, margin=1.01), rng.standard_normal(n)
        form = pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), RTOL)
        ref = reference(H, w)
        assert form.rank == ref["rank"] and form.min_kept_rel_eig > RTOL * 1.005
        assert abs(form.value - ref["value"]) <= 100 * tolerance(ref)
        dropped = pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), 1.5 * RTOL)
        assert dropped.rank < ref["rank"] and abs(dropped.value - ref["value"]) > 100 * tolerance(ref)


@pytest.mark.parametrize("band", [1, 2, 7, 16, 64])
@pytest.mark.parametrize("n", [1, 2, 3, 9, 17, 33, 65, 130])
def test_every_band_and_panel_boundary(band, n):
    rng = np.random.default_rng(n * 100 + band)
    H, w = matrix("indefinite", n, rng), rng.standard_normal(n)
    Ht = torch.from_numpy(H)
    before = Ht.clone()
    lam, c = tridiagonal_spectrum(Ht, torch.from_numpy(w), band=band)
    assert torch.equal(Ht, before)  # copied unless overwrite=True
    ref_lam = np.linalg.eigvalsh(H)
    assert np.abs(np.sort(lam) - ref_lam).max() <= 50 * n * EPS * np.abs(ref_lam).max()
    # the weights c_i = (u_iᵀw)² reproduce the moments wᵀHᵏw, k = 0, 1, 2
    for k in range(3):
        moment = w @ np.linalg.matrix_power(H, k) @ w
        assert abs((c * lam**k).sum() - moment) <= 1e-12 * (np.abs(lam) ** k * c).sum()
    pinv_ref = reference(H, w)
    from_tri = pinv.cutoff_sum(lam, c, RTOL)
    assert abs(from_tri.value - pinv_ref["value"]) <= tolerance(pinv_ref)


def test_weights_match_eigh_on_separated_spectrum():
    rng = np.random.default_rng(3)
    n = 200
    lam0 = np.linspace(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    Q = orthogonal(n, rng)
    H, w = (Q * lam0) @ Q.T, rng.standard_normal(n)
    a = tridiagonal_spectrum(torch.from_numpy(H), torch.from_numpy(w))
    b = eigh_spectrum(torch.from_numpy(H), torch.from_numpy(w))
    order_a, order_b = np.argsort(a[0]), np.argsort(b[0])
    assert np.allclose(a[0][order_a], b[0][order_b], rtol=0, atol=1e-13)
    assert np.allclose(a[1][order_a], b[1][order_b], rtol=0, atol=1e-10 * (w @ w))


@pytest.mark.parametrize("kind", KINDS)
def test_rescaling_invariance(kind, tridiagonal_only):
    """T7 with A = cI, c = 2, so (A⁻ᵀHA⁻¹)⁺ = c²H⁺: with H -> c⁻²H the kept set is unchanged,
    w -> c⁻¹w (how a gradient maps) leaves wᵀH⁺w unchanged and w -> cw (how the weights map)
    multiplies it by exactly c⁴, which with wᵀw -> c²wᵀw and ‖g‖² -> c⁻²‖g‖² leaves D⁺
    unchanged."""
    rng = np.random.default_rng(11)
    n = N_FAST
    H, w = torch.from_numpy(matrix(kind, n, rng)), torch.from_numpy(rng.standard_normal(n))
    a = pinv_quadratic_form(H, w, RTOL)
    b = pinv_quadratic_form(H / 4.0, w / 2.0, RTOL)
    assert (a.rank, a.min_kept_rel_eig) == (b.rank, b.min_kept_rel_eig)
    assert abs(a.value - b.value) <= 1e-12 * abs(a.value)
    c4 = pinv_quadratic_form(H / 4.0, 2.0 * w, RTOL)
    assert abs(c4.value - 16.0 * a.value) <= 1e-12 * abs(16.0 * a.value)
    assert c4.cutoff == a.cutoff / 4.0 and c4.max_abs_eig == a.max_abs_eig / 4.0
    # and with an exact orthogonal map (a signed permutation): same kept set, value to tolerance
    perm, signs = torch.from_numpy(rng.permutation(n)), torch.from_numpy(rng.choice([-1.0, 1.0], n))
    Hp, wp = (H * signs[:, None] * signs[None, :])[perm][:, perm], (w * signs)[perm]
    c = pinv_quadratic_form(Hp, wp, RTOL)
    assert c.rank == a.rank
    assert abs(c.value - a.value) <= tolerance(reference(H.numpy(), w.numpy()))


@pytest.mark.parametrize("n", [1, 4, FAST_MIN_SIZE + 3])
def test_degenerate_inputs(n):
    zero = torch.zeros(n, n, dtype=torch.float64)
    w = torch.ones(n, dtype=torch.float64)
    f = pinv_quadratic_form(zero, w, RTOL)
    assert (f.value, f.rank, f.cutoff, f.max_abs_eig, f.min_kept_rel_eig) == (0.0, 0, 0.0, 0.0, None)
    if n > 1:
        H = torch.from_numpy(matrix("psd", n, np.random.default_rng(n)))
    else:
        H = torch.tensor([[3.0]], dtype=torch.float64)
    g = pinv_quadratic_form(H, torch.zeros(n, dtype=torch.float64), RTOL)
    assert g.value == 0.0 and g.rank == n
    e1 = torch.zeros(n, dtype=torch.float64)
    e1[0] = 1.0  # w already along e₁: the reflection is the identity
    ref = reference(H.numpy(), e1.numpy())
    assert abs(pinv_quadratic_form(H, e1, RTOL).value - ref["value"]) <= tolerance(ref)


def test_only_exact_zero_rows_are_dropped(tridiagonal_only):
    """Exactly zero rows are removed (exact zero eigenvalues, never kept); a row that is zero
    except for its diagonal is a kept eigenvalue. Same answer as the eigh route on the full matrix."""
    rng = np.random.default_rng(2)
    n = N_FAST
    H = matrix("psd", n, rng)
    H[3], H[:, 3] = 0.0, 0.0
    H[5], H[:, 5] = 0.0, 0.0
    H[5, 5] = 1e-3
    w = rng.standard_normal(n)
    form = pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), RTOL)
    ref = check(H, w, form, n)
    assert form.rank == ref["rank"] == n - 1
    assert abs(form.value - reference(np.delete(np.delete(H, 3, 0), 3, 1), np.delete(w, 3))["value"]) <= tolerance(ref)
    # rtol = 0 keeps every non-zero eigenvalue but never the exact zero of row 3
    assert pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), 0.0).rank == n - 1


def test_input_is_not_modified_and_asymmetry_is_averaged(tridiagonal_only):
    rng = np.random.default_rng(4)
    n = FAST_MIN_SIZE + 5
    S = matrix("indefinite", n, rng)
    skew = rng.standard_normal((n, n)) * 1e-3
    H = torch.from_numpy(S + skew - skew.T)
    before = H.clone()
    w = torch.from_numpy(rng.standard_normal(n))
    form = pinv_quadratic_form(H, w, RTOL)
    assert torch.equal(H, before)
    ref = reference(S, w.numpy())
    assert abs(form.value - ref["value"]) <= tolerance(ref)


@pytest.mark.parametrize(
    "H, w, rtol",
    [
        (torch.zeros(3, 4, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), 1e-10),
        (torch.eye(3, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), 1e-10),
        (torch.full((2, 2), float("nan"), dtype=torch.float64), torch.ones(2, dtype=torch.float64), 1e-10),
        (torch.eye(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64), -1.0),
    ],
)
def test_bad_input(H, w, rtol):
    with pytest.raises(InvalidInputError):
        pinv_quadratic_form(H, w, rtol)
