"""The projection-output route for per-head attention blocks (numeric/factors/head_hessians.py) against the
route it replaces (each block's H_bb assembled column by column from Hessian-vector products), on GPT-2 and
BERT configs and a declared attention module; negative controls: sequences coupled, a projection's output
reaching the loss outside attention (the route's own result moves and the engine falls back). The projected
form H_bb = PMPᵀ (fewer tokens than input columns) against the full eigendecomposition of the same block, its
profile, a basis missing a direction (D⁺ moves, the check refuses it) and its planning above max_dense."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch
from torch import nn

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.engine import execute, plan, run_options
from coupled_curvature.numeric.core.head_blocks import head_blocks
from coupled_curvature.numeric.core.hvp import _dense_block, math_attention
from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.profile import spectral_profile
from coupled_curvature.numeric.core.routes import SpectralRoute
from coupled_curvature.numeric.core.slices import model_partition
from coupled_curvature.numeric.factors import head_hessians
from coupled_curvature.numeric.factors.head_hessians import head_block_hessians, head_block_requests
from coupled_curvature.numeric.factors.projected_hessian import ProjectedHessian
from coupled_curvature.numeric.linalg.pinv import conditioned_rtol

CE = nn.CrossEntropyLoss()


def lm_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return CE(out[:, :-1].reshape(-1, out.shape[-1]), y[:, 1:].reshape(-1))


class Heads(nn.Module):
    """A declared attention module (q, k, v, o, num_heads) with a readout; ``couple`` mixes the sequences,
    ``leak`` lets the query projection reach the output outside attention."""

    def __init__(self, couple: bool = False, leak: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(6, 6) for _ in range(4))
        self.num_heads = 2
        self.head = nn.Linear(6, 3)
        self.couple, self.leak = couple, leak

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        zq = self.q(x)
        q, k, v = (z.unflatten(-1, (2, 3)).transpose(1, 2) for z in (zq, self.k(x), self.v(x)))
        a = torch.softmax(q @ k.transpose(-1, -2) / 3 ** 0.5, -1) @ v
        h = torch.tanh(self.o(a.transpose(1, 2).flatten(-2)) + x)
        if self.couple:
            h = h + h.mean(dim=0, keepdim=True) ** 2
        if self.leak:
            h = h + 0.3 * zq ** 2
        return self.head(h)


def _declared(couple: bool = False, leak: bool = False):
    torch.manual_seed(0)
    net = Heads(couple, leak).double()
    X = torch.randn(3, 4, 6, dtype=torch.float64)
    y = torch.randint(0, 3, (3, 4))
    return net, (X, y), lambda out, t: CE(out.reshape(-1, 3), t.reshape(-1))


def _gpt2():
    transformers = pytest.importorskip("transformers", reason="transformers (the hf extra) is not installed")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=8, n_head=2, vocab_size=20, n_positions=8, bos_token_id=0,
                                  eos_token_id=0)
    net = transformers.GPT2LMHeadModel(cfg).double().eval()
    X = torch.randint(0, 20, (3, 5), generator=torch.Generator().manual_seed(0))
    return net, (X, X), lm_loss


def _bert():
    transformers = pytest.importorskip("transformers", reason="transformers (the hf extra) is not installed")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=16, max_position_embeddings=8)
    net = transformers.BertForMaskedLM(cfg).double().eval()
    X = torch.randint(0, 20, (3, 5), generator=torch.Generator().manual_seed(1))
    return net, (X, X), lambda out, t: CE(out.reshape(-1, out.shape[-1]), t.reshape(-1))


def _route_and_reference(net, data, loss_fn):
    """The route's H_bb and the assembled one for every head block of the first batch."""
    sp = model_partition(net, "head")
    ob = Objective(net, loss_fn, prepare_batches(data, loss_fn), pieces=sp.pieces)
    requests = head_block_requests(ob, sp.partition)
    with math_attention():
        route = head_block_hessians(ob, 0, requests)
        leaves, grads = next(ob.graphs())
        reference = {b: _dense_block(grads, leaves, sp.partition[b]) for b in requests}
    return requests, route, reference


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("build, blocks", [(_declared, 8), (_gpt2, 16), (_bert, 8)], ids=["declared", "gpt2", "bert"])
def test_route_matches_assembled_blocks(build, blocks):
    requests, route, reference = _route_and_reference(*build())
    assert len(requests) == blocks and set(route) == set(requests)
    assert {r.kind for r in requests.values()} == {"q", "k", "v", "o"}
    for b in requests:
        assert route[b].shape == reference[b].shape
        assert _relative(route[b], reference[b]) <= 1e-10, b


@pytest.mark.parametrize("couple, leak", [(True, False), (False, True)], ids=["sequences-coupled", "query-leaks"])
def test_route_premises_broken_move_it_and_the_engine_falls_back(couple, leak):
    net, data, loss_fn = _declared(couple, leak)
    requests, route, reference = _route_and_reference(net, data, loss_fn)
    moved = [b for b in requests if _relative(route[b], reference[b]) > 1e-6]
    assert moved  # the route's premises matter: its result is wrong here
    p = plan(net, loss_fn, data, run_options(blocks="head", method="dense"))
    run = execute(p)
    for b in moved:
        assert any("per-head projection route disagreed" in n for n in run.blocks[b].notes), b
        assert _relative(run.blocks[b].dense, reference[b]) <= 1e-12


def test_engine_takes_the_route_on_gpt2_and_keeps_d_plus():
    net, data, loss_fn = _gpt2()
    _, route, reference = _route_and_reference(net, data, loss_fn)
    run = execute(plan(net, loss_fn, data, run_options(blocks="head", method="dense")))
    for b, ref in reference.items():
        bc = run.blocks[b]
        assert not any("assembled from Hessian-vector products" in n for n in bc.notes), (b, bc.notes)
        dense = bc.dense.full() if isinstance(bc.dense, ProjectedHessian) else bc.dense  # LayerNorm: rank(X̃) < 9
        assert _relative(dense, route[b]) <= 1e-12, b
        exact = torch.linalg.pinv(ref, rtol=1e-10, hermitian=True)
        want = float(bc.w @ exact @ bc.w)
        assert abs(bc.pinv_form(1e-10).value - want) <= 1e-8 * max(abs(want), 1.0), b


def test_multihead_attention_is_not_taken():
    net = nn.Sequential(nn.MultiheadAttention(4, 2, batch_first=True)).double()
    sp = model_partition(net, "head")
    ob = Objective(net, nn.MSELoss(), [], pieces=sp.pieces)
    assert head_block_requests(ob, sp.partition) == {}


# --- the projected form H_bb = P M Pᵀ (fewer tokens than input columns + 1) ---------------------------------------


def _narrow_gpt2(seqs: int = 1):
    """GPT-2 whose per-head q/k/v blocks take 16 + 1 input columns and see 2 x 4 = 8 tokens per batch (``seqs``
    batches): the row space of X̃ has at most 8 of 17 dimensions, so the projection is real."""
    transformers = pytest.importorskip("transformers", reason="transformers (the hf extra) is not installed")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=20, n_positions=8, bos_token_id=0,
                                  eos_token_id=0)
    net = transformers.GPT2LMHeadModel(cfg).double().eval()
    gen = torch.Generator().manual_seed(0)
    batches = [(X, X) for X in (torch.randint(0, 20, (2, 4), generator=gen) for _ in range(seqs))]
    heads = {b: ms for b, ms in head_blocks(net).blocks.items() if ".c_attn." in b}
    return net, batches[0] if seqs == 1 else batches, heads


def _runs(net, data, blocks, **options):
    """The engine's run with the projection and one with it switched off (full dense eigendecomposition)."""
    p = plan(net, lm_loss, data, run_options(blocks=blocks, method="dense", max_dense=200, **options))
    projected = execute(p)
    with mock.patch("coupled_curvature.numeric.factors.head_hessians.row_basis", lambda X: None):
        full = execute(plan(net, lm_loss, data, run_options(blocks=blocks, method="dense", max_dense=200, **options)))
    return projected, full


@pytest.mark.parametrize("seqs", [1, 2], ids=["one-batch", "two-batches"])
def test_projected_blocks_give_the_full_eigendecomposition(seqs):
    net, data, heads = _narrow_gpt2(seqs)
    projected, full = _runs(net, data, heads)
    for b in heads:
        pb, fb = projected.blocks[b], full.blocks[b]
        assert isinstance(pb.dense, ProjectedHessian) and isinstance(fb.dense, torch.Tensor), b
        assert pb.dense.core.shape[0] <= 8 * 8 * seqs < pb.size == 136, b  # C·r ≤ head_dim · tokens
        assert not pb.notes, (b, pb.notes)  # the check (PMPᵀw, PMPᵀr against products) passed
        assert _relative(pb.dense.full(), fb.dense) <= 1e-10, b
        for rtol in (1e-10, 1e-6):
            got, want = pb.pinv_form(rtol), fb.pinv_form(rtol)
            assert got.rank == want.rank and abs(got.cutoff - want.cutoff) <= 1e-12 * want.cutoff, (b, rtol)
            tol = conditioned_rtol(1e-10, 1.0 / want.min_kept_rel_eig)
            assert abs(got.value - want.value) <= tol * abs(want.value), (b, rtol, got.value, want.value)


def test_projected_profile_weights_sum_to_one_with_the_null_space_at_zero():
    net, data, heads = _narrow_gpt2()
    b = "transformer.h.0.attn.c_attn.v[0]"
    options = {"blocks": {b: heads[b]}, "method": "dense", "max_dense": 200}
    prof = spectral_profile(net, lm_loss, data, **options)[b]
    with mock.patch("coupled_curvature.numeric.factors.head_hessians.row_basis", lambda X: None):
        ref = spectral_profile(net, lm_loss, data, **options)[b]
    assert prof.route == ref.route == "dense" and prof.exact
    assert abs(float(prof.weights.sum()) - 1.0) <= 1e-12 and abs(float(ref.weights.sum()) - 1.0) <= 1e-12
    run = execute(plan(net, lm_loss, data, run_options(**options)))
    ph, w = run.blocks[b].dense, run.blocks[b].w
    assert isinstance(ph, ProjectedHessian)
    null = float(((w - ph.extend(ph.restrict(w))) ** 2).sum() / (w @ w))
    assert null > 0.1  # much of w lies outside the row space of 8 tokens: its weight sits at x = 0
    zero = float(prof.weights[prof.rel_eigs == 0.0].sum())
    assert zero >= null - 1e-12 and abs(zero - float(ref.weights[ref.rel_eigs == 0.0].sum())) <= 1e-9
    live, live_ref = np.abs(prof.rel_eigs) > 1e-9, np.abs(ref.rel_eigs) > 1e-9
    assert live.sum() == live_ref.sum() > 0
    assert np.allclose(prof.rel_eigs[live], ref.rel_eigs[live_ref], rtol=1e-8, atol=1e-12)
    assert np.allclose(prof.weights[live], ref.weights[live_ref], rtol=1e-7, atol=1e-12)
    assert abs(prof.radius - ref.radius) <= 1e-12 * ref.radius


def test_a_basis_missing_a_direction_moves_d_plus_and_the_check_refuses_it():
    net, data, heads = _narrow_gpt2()
    right, _ = _runs(net, data, heads)
    sp = model_partition(net, heads)
    ob = Objective(net, lm_loss, prepare_batches(data, lm_loss), pieces=sp.pieces)
    requests = head_block_requests(ob, sp.partition)
    real = head_hessians.row_basis
    with mock.patch.object(head_hessians, "row_basis", lambda X: real(X)[:, :-1]):  # drops a row direction
        with math_attention():
            wrong = head_block_hessians(ob, 0, requests, project=True)
        run = execute(plan(net, lm_loss, data, run_options(blocks=heads, method="dense", max_dense=200)))
    for b in heads:
        good = right.blocks[b]
        moved = wrong[b].spectrum(good.w).form(1e-10).value
        assert abs(moved - good.pinv_form(1e-10).value) > 1e-6 * abs(good.pinv_form(1e-10).value), b
        caught = run.blocks[b]
        assert any("per-head projection route disagreed" in n for n in caught.notes), b
        assert isinstance(caught.dense, torch.Tensor)  # assembled from Hessian-vector products instead
        want = good.pinv_form(1e-10)
        tol = conditioned_rtol(1e-9, 1.0 / want.min_kept_rel_eig)
        assert abs(caught.pinv_form(1e-10).value - want.value) <= tol * abs(want.value), b


def test_a_head_block_above_max_dense_whose_projection_fits_is_dense_not_krylov():
    net, data, heads = _narrow_gpt2()
    for method in ("auto", "dense", "gram"):
        p = plan(net, lm_loss, data, run_options(blocks=heads, method=method, max_dense=100))
        for b in heads:  # 136 entries > 100 ≥ 8 head columns x 8 tokens
            route = p.blocks[b].fallback if p.blocks[b].spectral is SpectralRoute.GRAM else p.blocks[b].spectral
            reason = p.blocks[b].fallback_reason or p.blocks[b].spectral_reason
            assert route is SpectralRoute.DENSE and "at most 64 dimensions" in reason, (method, b, reason)
    d = diagnose(net, lm_loss, data, blocks=heads, method="auto", max_dense=100)
    ref = diagnose(net, lm_loss, data, blocks=heads, method="dense", max_dense=200)
    for b in heads:
        assert d[b].method is SpectralRoute.DENSE and d[b].krylov_iterations is None, b
        tol = conditioned_rtol(1e-10, 1.0 / ref[b].min_kept_rel_eig)
        assert abs(d[b].inverse_coupled - ref[b].inverse_coupled) <= tol * abs(ref[b].inverse_coupled), b
    p = plan(net, lm_loss, data, run_options(blocks=heads, method="auto", max_dense=50))  # 64 > 50: Krylov
    assert all(p.blocks[b].fallback is SpectralRoute.KRYLOV for b in heads)
    p = plan(net, lm_loss, data, run_options(blocks=heads, method="dense", max_dense=50))
    assert all(p.blocks[b].spectral is SpectralRoute.NONE for b in heads)


def test_an_unconverged_head_block_names_the_max_dense_its_projection_needs():
    """Lanczos cut short on a head block (136 entries, Hessian in at most 64 dimensions): the refusal names
    max_dense ≥ 64, not the block's size, and that max_dense then gives the exact D⁺ of the assembled block."""
    net, data, heads = _narrow_gpt2()
    d = diagnose(net, lm_loss, data, blocks=heads, method="auto", max_dense=50, krylov_max_iter=2)
    ref = diagnose(net, lm_loss, data, blocks=heads, method="dense", max_dense=200)
    p = plan(net, lm_loss, data, run_options(blocks=heads, method="dense", max_dense=50))
    for b in heads:
        assert d[b].size == 136 and d[b].inverse_coupled is None and d[b].krylov_converged is False, b
        assert "max_dense ≥ 64 (the dimension its per-head Hessian" in d[b].dplus_missing, d[b].dplus_missing
        assert "raise max_dense to 64 " in p.blocks[b].spectral_reason, p.blocks[b].spectral_reason
    fixed = diagnose(net, lm_loss, data, blocks=heads, method="auto", max_dense=64)
    for b in heads:
        tol = conditioned_rtol(1e-10, 1.0 / ref[b].min_kept_rel_eig)
        assert abs(fixed[b].inverse_coupled - ref[b].inverse_coupled) <= tol * abs(ref[b].inverse_coupled), b
    mlp = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3)).double()  # control: not a head block
    X, y = torch.randn(8, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), torch.arange(8) % 3
    u = diagnose(mlp, CE, (X, y), blocks={"w": ["0.weight"]}, method="krylov", krylov_max_iter=2)["w"]
    assert u.inverse_coupled is None and "max_dense ≥ 72 (its size" in u.dplus_missing, u.dplus_missing


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_projected_route_matches_assembled_blocks_with_and_without_bias(bias):
    torch.manual_seed(0)
    net = Heads().double()
    if not bias:  # the q, k, v blocks hold no bias entry: the basis spans the rows of X alone, not [X, 1]
        for m in (net.q, net.k, net.v):
            m.bias = None
    X, y = torch.randn(1, 3, 6, dtype=torch.float64), torch.randint(0, 3, (1, 3))
    loss_fn = lambda out, t: CE(out.reshape(-1, 3), t.reshape(-1))
    sp = model_partition(net, "head")
    ob = Objective(net, loss_fn, prepare_batches((X, y), loss_fn), pieces=sp.pieces)
    requests = head_block_requests(ob, sp.partition)
    with math_attention():
        route = head_block_hessians(ob, 0, requests, project=True)
        leaves, grads = next(ob.graphs())
        reference = {b: _dense_block(grads, leaves, sp.partition[b]) for b in requests}
    assert sum(r.kind != "o" for r in requests.values()) == 6
    for b, r in requests.items():
        if r.kind == "o":  # 3 tokens ≥ 3 value columns: nothing to project
            continue
        assert isinstance(route[b], ProjectedHessian) and route[b].basis.shape == (6 + bias, 3), b
        assert _relative(route[b].full(), reference[b]) <= 1e-10, b
