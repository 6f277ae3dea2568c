"""The projection-output route for per-head attention blocks (numeric/factors/head_hessians.py) against the
route it replaces (each block's H_bb assembled column by column from Hessian-vector products), on GPT-2 and
BERT configs and a declared attention module; negative controls: sequences coupled, a projection's output
reaching the loss outside attention (the route's own result moves and the engine falls back)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from coupled_curvature.numeric.core.engine import execute, plan, run_options
from coupled_curvature.numeric.core.hvp import _dense_block, math_attention
from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.slices import model_partition
from coupled_curvature.numeric.factors.head_hessians import head_block_hessians, head_block_requests

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
        assert torch.equal(bc.dense, route[b])
        exact = torch.linalg.pinv(ref, rtol=1e-10, hermitian=True)
        want = float(bc.w @ exact @ bc.w)
        assert abs(bc.pinv_form(1e-10).value - want) <= 1e-8 * max(abs(want), 1.0), b


def test_multihead_attention_is_not_taken():
    net = nn.Sequential(nn.MultiheadAttention(4, 2, batch_first=True)).double()
    sp = model_partition(net, "head")
    ob = Objective(net, nn.MSELoss(), [], pieces=sp.pieces)
    assert head_block_requests(ob, sp.partition) == {}
