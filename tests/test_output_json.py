"""The one JSON policy of ``coupled_curvature.base.output``: strict JSON (no NaN/Infinity tokens) for every
file a command writes and for ``Diagnosis.to_json``."""

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from coupled_curvature.base.errors import CoupledCurvatureError
from coupled_curvature.base.output import json_text, strict_json, write_json


def _strict_loads(text: str):
    """json.loads that refuses the non-standard tokens Python's json would accept."""
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
                    max_leaves=20))
def test_any_plain_data_gives_strict_json_that_reads_back(x):
    back = _strict_loads(json_text(x))

    def same(a, b):
        if isinstance(a, float) and not math.isfinite(a):
            return b == ("nan" if math.isnan(a) else "inf" if a > 0 else "-inf")
        if isinstance(a, dict):
            return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return len(a) == len(b) and all(same(u, v) for u, v in zip(a, b))
        return a == b and type(a) is type(b)
    assert same(x, back)


def test_numpy_and_torch_scalars_keep_their_kind():
    out = strict_json({"b": np.bool_(True), "i": np.int64(3), "f": np.float32(0.5), "t": torch.tensor(2.0),
                       "inf": torch.tensor(float("inf"), dtype=torch.float64)})
    assert out == {"b": True, "i": 3, "f": 0.5, "t": 2.0, "inf": "inf"}
    assert type(out["b"]) is bool and type(out["i"]) is int


def test_unknown_objects_are_refused_not_stringified():
    with pytest.raises(CoupledCurvatureError, match="cannot write object"):
        strict_json({"x": object()})


def test_write_json_writes_no_nan_token(tmp_path):
    """Negative control: Python's default json.dumps would write NaN here."""
    data = {"gap": float("nan"), "change": float("inf")}
    assert "NaN" in json.dumps(data)
    text = (tmp_path / "x.json").read_text() if write_json(str(tmp_path / "x.json"), data) else ""
    assert "NaN" not in text and "Infinity" not in text
    assert _strict_loads(text) == {"gap": "nan", "change": "inf"}
