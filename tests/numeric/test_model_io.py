"""Any model's output and any batch: the engine's one calling rule (numeric/core/calling.py) and mapping batches
(numeric/core/dict_batches.py) give the same D and D⁺ as the plain tensor model on tensor batches, a wrong
selection gives another value or our error, and bad choices are refused before any work."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.profile import spectral_profile
from coupled_curvature.numeric.measures.registry import coupled, curvature_rate_measure
from coupled_curvature.numeric.studies.cutoff import cutoff_sensitivity
from coupled_curvature.numeric.tracking.tracker import CurvatureTracker

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is not installed (the hf extra)")
LOSS = nn.CrossEntropyLoss()


def _mlp(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 3))


def _data(seed: int, n: int = 12):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


class Wrapped(nn.Module):
    """The MLP's logits in another structure; ``keyword`` makes its input a keyword argument ``x``."""

    def __init__(self, net: nn.Module, kind: str):
        super().__init__()
        self.net, self.kind = net, kind

    def forward(self, x, scale=None):
        z = self.net(x if scale is None else x * scale)
        return {"tuple": lambda: (z, 2 * z), "list": lambda: [z, x], "dict": lambda: {"hidden": x, "logits": z},
                "tensor": lambda: z, "model_output": lambda: _model_output(z)}[self.kind]()


def _model_output(z):
    if HAVE_TRANSFORMERS:
        from transformers.modeling_outputs import SequenceClassifierOutput

        return SequenceClassifierOutput(logits=z)
    return {"logits": z}


def _values(d) -> dict:
    return {b.name.removeprefix("net."): (b.coupled, b.inverse_coupled) for b in d}


def _close(a: dict, b: dict, rtol: float = 1e-9) -> bool:
    assert a.keys() == b.keys()
    return all((x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, rel_tol=rtol,
                                                                                                 abs_tol=1e-300))
               for k in a for x, y in zip(a[k], b[k]))


@settings(max_examples=3, deadline=None, derandomize=True)
@given(seed=st.integers(0, 1000), kind=st.sampled_from(["tuple", "list", "dict", "model_output"]))
def test_structured_outputs_give_the_plain_models_D(seed, kind):
    X, y = _data(seed)
    plain = _values(diagnose(_mlp(seed), LOSS, (X, y)))
    got = _values(diagnose(Wrapped(_mlp(seed), kind), LOSS, (X, y)))
    assert _close(got, plain), (got, plain)


def test_output_selects_by_key_index_or_callable_and_the_wrong_one_differs():
    X, y = _data(3)
    plain = _values(diagnose(_mlp(3), LOSS, (X, y)))
    for kind, output in (("tuple", 0), ("tuple", -2), ("dict", "logits"), ("tensor", lambda z: z),
                         ("model_output", lambda out: out["logits"])):
        got = _values(diagnose(Wrapped(_mlp(3), kind), LOSS, (X, y), output=output))
        assert _close(got, plain), (kind, output)
    wrong = _values(diagnose(Wrapped(_mlp(3), "tuple"), LOSS, (X, y), output=1))  # 2·logits: another loss
    assert not _close(wrong, plain, rtol=1e-3)
    with pytest.raises(InvalidInputError, match=r"have shape \(12,\) but the outputs \(12, 3\)"):  # the selected one
        diagnose(Wrapped(_mlp(3), "dict"), nn.MSELoss(), (X, y.double()), output="hidden")


def test_a_mapping_without_logits_is_refused_naming_its_keys():
    class NoLogits(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _mlp(0)

        def forward(self, x):
            return {"scores": self.net(x)}

    X, y = _data(0)
    with pytest.raises(InvalidInputError, match=r"keys 'scores' and no tensor 'logits'; pass output="):
        diagnose(NoLogits(), LOSS, (X, y))
    assert diagnose(NoLogits(), LOSS, (X, y), output="scores")["net.0.weight"].coupled is not None


@settings(max_examples=3, deadline=None, derandomize=True)
@given(seed=st.integers(0, 1000), split=st.integers(1, 11))
def test_mapping_batches_give_the_tensor_batches_D(seed, split):
    X, y = _data(seed)
    s = torch.rand(12, 1, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) + 0.5
    model = Wrapped(_mlp(seed), "tensor")
    tensors = _values(diagnose(_mlp(seed), LOSS, [(X[:split] * s[:split], y[:split]), (X[split:] * s[split:], y[split:])]))
    dicts = [{"x": X[:split], "scale": s[:split], "labels": y[:split]}, {"x": X[split:], "scale": s[split:],
                                                                       "labels": y[split:]}]
    for method in (None, "dense"):
        assert _close(_values(diagnose(model, LOSS, dicts, method=method)), tensors), method
    assert _close(_values(diagnose(model, LOSS, dicts, inverse=False)),
                  {k: (v[0], None) for k, v in tensors.items()})
    # negative control: the scale left out (targets taken from another key) is another function
    other = [{"x": X, "scale": torch.ones_like(s), "y": y}]
    assert not _close(_values(diagnose(model, LOSS, other, target="y")), tensors, rtol=1e-3)


def test_mapping_batches_through_profile_cutoff_measures_and_tracker():
    X, y = _data(5)
    model, batch = Wrapped(_mlp(5), "dict"), {"x": X, "labels": y}
    d = diagnose(_mlp(5), LOSS, (X, y))["0.weight"]
    assert math.isclose(spectral_profile(model, LOSS, batch)["net.0.weight"].D(), d.coupled, rel_tol=1e-9)
    got = cutoff_sensitivity(model, LOSS, batch, rtols=[1e-10])["blocks"]["net.0.weight"]["inverse_coupled"][0]
    assert math.isclose(got, d.inverse_coupled, rel_tol=1e-9)
    assert math.isclose(coupled(model, LOSS, batch)["blocks"]["net.0.weight"], d.coupled, rel_tol=1e-9)
    t = CurvatureTracker(model, LOSS, {"x": X, "target": y}, target="target", every=1)
    assert math.isclose(t.record(0)["D/net.0.weight"], d.coupled, rel_tol=1e-9)
    # a callable target: every entry is an input, so the batch holds x only
    assert math.isclose(diagnose(model, LOSS, {"x": X}, target=lambda b: y)["net.0.weight"].coupled, d.coupled,
                        rel_tol=1e-9)
    with pytest.raises(InvalidInputError, match="needs float tensor inputs; these are a mapping batch"):
        curvature_rate_measure(model, LOSS, batch)  # λ moves the inputs: it refuses, it does not crash


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.net, self.calls = _mlp(0), 0

    def forward(self, x):
        self.calls += 1
        return (self.net(x), x)


@pytest.mark.parametrize("kwargs, data, match", [
    ({"output": "logits"}, None, r"output='logits' is a key, but the model returns a tuple .*pass output= an index"),
    ({"output": 2}, None, r"output=2 is out of range: .* 2 element\(s\); pass an index in 0\.\.1"),
    ({"output": lambda out: out[0].tolist()}, None, r"output\(out\) returned a list .*, not a tensor .*return the tensor the loss takes"),
    ({"output": 1.5}, None, r"output must be None, a key \(str\), an index \(int\) or a callable"),
    ({"target": 3}, None, r"target must be the key of the targets"),
    ({}, "no_labels", r"batch 0 has no entry 'labels' \(its keys: 'x', 'y'\); pass target="),
    ({}, "uneven", r"batch 0's entries have different sample counts \('x': 12, 'mask': 11\)"),
    ({}, "uneven_targets", r"batch 0: 12 inputs but 10 targets; pass one target per input"),
    ({}, "string", r"batch 0's entry 'text' is list, not an array of samples; .*drop the entries"),
])
def test_bad_choices_are_refused_before_any_work(kwargs, data, match):
    X, y = _data(0)
    batches = {None: (X, y), "no_labels": {"x": X, "y": y}, "uneven": {"x": X, "mask": X[:11], "labels": y},
               "uneven_targets": {"x": X, "labels": y[:10]}, "string": {"x": X, "text": ["a"] * 12, "labels": y}}
    model, losses = _Counting(), []

    def loss(out, target):
        losses.append(1)
        return LOSS(out, target)

    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(InvalidInputError, match=match):
        diagnose(model, loss, batches[data], **kwargs)
    assert losses == []  # the loss never ran: refused at the probe or before it
    if data is not None:
        assert model.calls == 0  # the batch is refused before any forward pass
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def _lm_loss(logits, labels):
    """Next-token cross-entropy of a causal LM: logits (batch, seq, vocab) shifted against labels (batch, seq)."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


def _tokens(seed: int, n: int = 3, length: int = 6):
    ids = torch.randint(0, 40, (n, length), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


@needs_transformers
def test_a_tiny_gpt2_from_a_config_end_to_end():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40, n_positions=16, bos_token_id=None,
                     eos_token_id=None)
    model = GPT2LMHeadModel(cfg).double().eval()
    batch = _tokens(1)
    blocks = {"head": ["transformer.h.0.mlp.c_proj.weight"]}
    d = diagnose(model, _lm_loss, {**batch, "labels": batch["input_ids"]}, blocks=blocks)["head"]
    assert d.coupled is not None and math.isfinite(d.coupled) and d.inverse_coupled is not None
    by_callable = diagnose(model, _lm_loss, {**batch, "labels": batch["input_ids"]}, blocks=blocks,
                           output=lambda out: out.logits)["head"]
    assert by_callable.coupled == d.coupled and by_callable.inverse_coupled == d.inverse_coupled
    unshifted = diagnose(model, lambda lo, la: F.cross_entropy(lo.reshape(-1, 40), la.reshape(-1)),
                         {**batch, "labels": batch["input_ids"]}, blocks=blocks)["head"]
    assert not math.isclose(unshifted.coupled, d.coupled, rel_tol=1e-3)  # negative control: another loss


@needs_transformers
def test_a_tiny_bert_classifier_end_to_end():
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=16, num_labels=3)
    model = BertForSequenceClassification(cfg).double().eval()
    batch = {**_tokens(2, n=4), "labels": torch.tensor([0, 1, 2, 1])}
    blocks = {"cls": ["classifier.weight", "classifier.bias"], "pool": ["bert.pooler.dense.weight"]}
    d = diagnose(model, nn.CrossEntropyLoss(), batch, blocks=blocks)
    assert all(d[b].coupled is not None and math.isfinite(d[b].coupled) for b in blocks)
    model.config.return_dict = False  # the tuple convention: logits first
    t = diagnose(model, nn.CrossEntropyLoss(), batch, blocks=blocks)
    assert _close(_values(t), _values(d))
    with pytest.raises(InvalidInputError, match="hold label 3, outside 0..2"):
        diagnose(model, nn.CrossEntropyLoss(), {**batch, "labels": torch.tensor([0, 1, 2, 3])}, blocks=blocks)


def test_the_exact_arithmetic_routes_refuse_mapping_batches_naming_the_fix():
    from coupled_curvature.numeric.certify.api import certify
    from coupled_curvature.numeric.highprec.engine import diagnose as exact_diagnose

    X, y = _data(0)
    for run, name in ((certify, "certify"), (exact_diagnose, "the mpmath route")):
        with pytest.raises(InvalidInputError, match=f"{name}.* takes tensor batches only.*pass data as \\(X, y\\)"):
            run(_mlp(0).double(), LOSS, {"x": X, "labels": y})
        with pytest.raises(InvalidInputError, match="takes tensor batches only"):
            run(_mlp(0).double(), LOSS, [{"x": X, "labels": y}])


def test_the_tracker_and_callbacks_take_output_and_target():
    from coupled_curvature.integrations.schedule import TrackerSchedule

    X, y = _data(4)
    d = diagnose(_mlp(4), LOSS, (X, y), inverse=False)["0.weight"].coupled
    with CurvatureTracker(Wrapped(_mlp(4), "tuple"), LOSS, {"x": X, "labels": y}, every=1, background=True) as t:
        t.step(0)
        t.flush()
    assert math.isclose(t.history[0]["D/net.0.weight"], d, rel_tol=1e-9)
    for bad, match in (({"output": 2.5}, "output must be None"), ({"target": None}, "target must be the key")):
        with pytest.raises(InvalidInputError, match=match):  # checked when the callback is made
            TrackerSchedule(LOSS, (X, y), every=1, **bad)
