"""``ortlab.kl_divergence`` (issue 46 item 6): a variant's next-token distributions against the
reference's, as llama-perplexity --kl-divergence measures them — checked against a loop of
plain onnxruntime sessions written here, and zero for a model against itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.errors import FeedError

HERE = Path(ortlab.__file__).parent / "decoders"


def _log_probs(path: Path, ids: list[int], d: ortlab.DecoderInfo) -> np.ndarray:
    """A prefill of ``ids`` from an empty cache in plain onnxruntime; log-softmax by logaddexp."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    n = len(ids)
    feeds = {"input_ids": np.asarray([ids], np.int64), "attention_mask": np.ones((1, n), np.int64)}
    for name in d.past_inputs:
        feeds[name] = np.zeros((1, d.kv_heads, 0, d.head_size), np.float32)
    z = sess.run(["logits"], feeds)[0][0].astype(np.float64)
    return z - np.logaddexp.reduce(z, axis=-1, keepdims=True)


def test_int4_against_fp32_equals_a_plain_onnxruntime_loop() -> None:
    ref, var = ortlab.load(HERE / "genai_fp32"), ortlab.load(HERE / "genai_int4")
    d = ref.decoder
    assert d is not None
    ids = np.random.default_rng(7).integers(0, 1000, size=200).tolist()
    r = ortlab.kl_divergence(ref, [var, ref], tokens=ids, window=64, progress=False)
    assert r.synthetic is False and r.positions == 200
    kl, agree = [], []
    for k in range(0, 200, 64):
        window = ids[k : k + 64]
        p, q = _log_probs(ref.path, window, d), _log_probs(var.path, window, d)
        kl += list((np.exp(p) * (p - q)).sum(axis=-1))
        agree += list(p.argmax(-1) == q.argmax(-1))
    row, same = r.rows
    assert row.kl == pytest.approx(kl, rel=1e-6, abs=1e-9)
    assert row.mean == pytest.approx(float(np.mean(kl)), rel=1e-6)
    assert row.p99 == pytest.approx(float(np.percentile(kl, 99)), rel=1e-6)
    assert row.top1 == pytest.approx(float(np.mean(agree)))
    assert row.mean > 0.01 and row.top1 < 1.0, "premise: int4 moves this tiny model's logits"
    assert same.max < 1e-9 and same.top1 == 1.0  # the reference against itself
    t = r.table
    assert list(t["variant"]) == ["genai_int4", "genai_fp32"] and "KLD mean" in r.to_text()
    assert ortlab.KLDResult.from_json(r.to_json()) == r and r.plot() is not None


def test_a_variant_must_read_the_same_tokens() -> None:
    with pytest.raises(FeedError, match="not a decoder"):
        ortlab.kl_divergence(ortlab.examples.load("mlp"), HERE / "genai_int4", progress=False)
    with pytest.raises(FeedError, match="same token ids"):
        ortlab.kl_divergence(HERE / "genai_int4", ortlab.examples.load("mlp"), progress=False)
