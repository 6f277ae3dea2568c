"""How the tangent route sends its cotangent rows back (numeric/factors/cotangents.py): one vectorised pass
per chunk of rows, or one pass per row on the CPU for a batch of ROW_PASS_SAMPLES samples or more. Both
give the same wᵀHw, gradient and gradient magnitudes to 1e-12 relative; the choice follows the rule, and an
explicit ``batched=`` overrides it. Negative controls: a perturbed network moves wᵀHw by far more than the
tolerance, and a cotangent row differs from its neighbour."""

import torch
from torch import nn

from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors import cotangents
from coupled_curvature.numeric.factors import tangent_forms as tf_module
from coupled_curvature.numeric.factors.tangent_forms import tangent_forms

CE = nn.CrossEntropyLoss()


def _net(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 9), nn.ReLU(), nn.Linear(9, 5)).double()


def _objective(net: nn.Module, n: int) -> Objective:
    g = torch.Generator().manual_seed(1)
    X = torch.randn(n, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (n,), generator=g)
    return Objective(net, CE, prepare_batches((X, y), CE))


def _partition(net: nn.Module) -> dict[str, list[str]]:
    return {name: [name] for name, _ in net.named_parameters()}


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def _passes(monkeypatch) -> list[int]:
    """Records the rows of every chunk the tangent route's cotangent passes yield."""
    seen: list[int] = []
    real = tf_module.cotangent_rows

    def spy(*args, **kwargs):
        for rows, g in real(*args, **kwargs):
            seen.append(rows.stop - rows.start)
            yield rows, g

    monkeypatch.setattr(tf_module, "cotangent_rows", spy)
    return seen


def test_per_row_passes_equal_the_vectorised_pass_to_1e_12(monkeypatch):
    net = _net()
    n = cotangents.ROW_PASS_SAMPLES + 44  # on the CPU: one pass per row by the rule
    seen = _passes(monkeypatch)
    per_row = tangent_forms(_objective(net, n), _partition(net))
    assert seen and set(seen) == {1}  # one row per pass
    seen.clear()
    monkeypatch.setattr(cotangents, "ROW_PASS_SAMPLES", 10 * n)  # the same batch, now below the bound
    together = tangent_forms(_objective(net, n), _partition(net))
    assert max(seen) > 1  # the rows together
    assert set(per_row.wHw) == set(together.wHw) == set(_partition(net)) and not per_row.reasons
    for b in together.wHw:
        assert _rel(per_row.wHw[b], together.wHw[b]) <= 1e-12, b
        assert torch.allclose(per_row.grads[b], together.grads[b], rtol=1e-12, atol=0.0)
        assert torch.allclose(per_row.magnitudes[b], together.magnitudes[b], rtol=1e-12, atol=0.0)
    assert per_row.outputs == together.outputs and per_row.loss == together.loss
    # negative control: a change of the network far smaller than the weights moves wᵀHw well beyond 1e-12
    moved = _net()
    with torch.no_grad():
        moved[2].weight.mul_(1 + 1e-6)
    other = tangent_forms(_objective(moved, n), _partition(moved))
    assert _rel(other.wHw["4.weight"], together.wHw["4.weight"]) > 1e-9


def test_the_rule_and_its_override():
    net = _net()
    rows = torch.randn(1, 4, 5, dtype=torch.float64)  # reshaped per batch size below

    def chunks(n: int, **kw) -> list[tuple[int, int]]:
        ob = _objective(net, n)
        fw = cotangents.shifted_forward(ob, 0, ["0", "2"])
        cot = rows.expand(n, 4, 5).contiguous() * torch.arange(1, n + 1, dtype=torch.float64).reshape(n, 1, 1)
        out = []
        got = {}
        for r, g in cotangents.cotangent_rows(fw, ["0", "2"], cot, **kw):
            out.append((r.start, r.stop))
            got[r.start] = g["0"]
        assert not torch.allclose(got[0][0], got[1][0] if 1 in got else got[0][1])  # control: rows differ
        return out

    big, small = cotangents.ROW_PASS_SAMPLES, cotangents.ROW_PASS_SAMPLES - 1
    assert chunks(big) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert chunks(small) == [(0, 4)]
    assert chunks(big, batched=True) == [(0, 4)]
    assert chunks(small, batched=False) == [(0, 1), (1, 2), (2, 3), (3, 4)]
