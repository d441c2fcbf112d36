"""Never stricter than onnxruntime (issue 46 item 3): ortlab refuses feeds only where plain
onnxruntime refuses them — checked on a Whisper-like decoder whose empty cross-attention past
shares its dim name with the encoder's frames, and on every corpus model's refusal cases (a
wrong dtype, rank, fixed dim, a missing or unknown input, two inputs disagreeing on a dim
name), each run in plain onnxruntime beside."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ortlab
from ortlab.core.errors import FeedError
from ortlab.core.feedcheck import validate_feeds
from tests import corpus


def _whisper_like() -> bytes:
    """A decoder step's shape of trouble: encoder states [1, 'encoder_sequence_length', 8]
    and a cross-attention past [1, 2, 'encoder_sequence_length', 4] that is empty in the first
    step; the output reads both."""
    states = helper.make_tensor_value_info(
        "encoder_hidden_states", TensorProto.FLOAT, [1, "encoder_sequence_length", 8]
    )
    past = helper.make_tensor_value_info(
        "past_key_values.0.encoder.key", TensorProto.FLOAT, [1, 2, "encoder_sequence_length", 4]
    )
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    nodes = [
        helper.make_node("ReduceSum", ["encoder_hidden_states"], ["a"], keepdims=0),
        helper.make_node("ReduceSum", ["past_key_values.0.encoder.key"], ["b"], keepdims=0),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "whisper_like", [states, past], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model.SerializeToString()


def _ort_runs(model: Any, feeds: dict[str, Any]) -> bool:
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    try:
        s.run(None, feeds)
    except Exception:  # noqa: BLE001 - whatever onnxruntime refuses
        return False
    return True


def _ortlab_accepts(m: ortlab.Model, feeds: dict[str, Any]) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ortlab.OrtlabWarning)
        try:
            validate_feeds(m, feeds)
        except FeedError:
            return False
    return True


def test_a_whisper_prefills_empty_cross_past_runs_as_in_onnxruntime() -> None:
    data = _whisper_like()
    feeds = {
        "encoder_hidden_states": np.ones((1, 1500, 8), np.float32),
        "past_key_values.0.encoder.key": np.zeros((1, 2, 0, 4), np.float32),
    }
    assert _ort_runs(data, feeds), "premise: plain onnxruntime runs the prefill"
    m = ortlab.load(data)
    with pytest.warns(ortlab.OrtlabWarning, match="disagree on a dim"):
        b = ortlab.benchmark(m, feeds=feeds, runs=3, warmup=1, progress=False)
    assert b.stats.count == 3
    with pytest.warns(ortlab.OrtlabWarning, match="disagree on a dim"):
        p = ortlab.placement(m, feeds=feeds, runs=2, progress=False)
    assert len(p.nodes) == 3


def _cases(m: ortlab.Model, feeds: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Feeds onnxruntime may or may not refuse, made from a model's real feeds."""
    out: dict[str, dict[str, Any]] = {"as given": dict(feeds)}
    first = m.inputs[0]
    arr = np.asarray(feeds[first.name])
    other = np.float64 if arr.dtype != np.float64 else np.float32
    out["wrong dtype"] = {**feeds, first.name: arr.astype(other)}
    out["extra axis"] = {**feeds, first.name: arr[None]}
    out["missing input"] = {k: v for k, v in feeds.items() if k != first.name}
    out["unknown input"] = {**feeds, "not_an_input": np.zeros(1, np.float32)}
    for t in m.inputs:
        fixed = [k for k, d in enumerate(t.shape or []) if isinstance(d, int) and d > 1]
        if fixed:
            a = np.asarray(feeds[t.name])
            k = fixed[-1]
            out[f"fixed dim {k} of {t.name}"] = {**feeds, t.name: np.take(a, [0], axis=k)}
            break
    seen: dict[str, str] = {}
    for t in m.inputs:
        for k, d in enumerate(t.shape or []):
            if isinstance(d, str) and d in seen and seen[d] != t.name:
                a = np.asarray(feeds[t.name])
                grown = np.concatenate([a, np.take(a, [0], axis=k)], axis=k)
                out[f"{d} disagrees"] = {**feeds, t.name: grown}
            elif isinstance(d, str):
                seen.setdefault(d, t.name)
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus.LIGHT)
def test_every_refusal_is_onnxruntimes_own(name: str) -> None:
    """On each corpus model, every case ortlab refuses is one plain onnxruntime refuses."""
    m = corpus.load(name)
    cases = _cases(m, corpus.feeds(name))
    stricter = [
        case
        for case, feeds in cases.items()
        if not _ortlab_accepts(m, feeds) and _ort_runs(str(m.path), feeds)
    ]
    assert not stricter, f"{name}: ortlab refuses what onnxruntime runs: {stricter}"
    assert _ortlab_accepts(m, cases["as given"])
    assert not _ortlab_accepts(m, cases["missing input"])
