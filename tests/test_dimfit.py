"""Guesses that fit (issue 47 item 2): a dim is guessed from how the graph uses it, and the
shapes a guess implies are known to fit before anything runs. Checked on a diffusion UNet's
block (tests/models.unet_block: GroupNorm via Reshape, the timestep embedding broadcast against
the batch, attention over H x W), against plain onnxruntime and the shapes' own arithmetic."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.errors import FeedError
from ortlab.core.inputs import resolve_dims
from ortlab.engine.calls import fitted_dims
from ortlab.engine.fitdims import fit_guesses
from ortlab.engine.graphdims import footprint_at, merged_symbols
from tests import models


@pytest.fixture(scope="module")
def unet() -> ortlab.Model:
    return ortlab.load(models.unet_block())


def test_the_timestep_is_batch_like_because_the_graph_broadcasts_it(unet: ortlab.Model) -> None:
    """The graph unifies steps with batch; plain onnxruntime agrees: 2 timesteps against a
    batch of 1 make an output of batch 2 (the broadcast), and ortlab guesses steps = 1."""
    merged = merged_symbols(unet.proto)  # either way round: one symbol becomes the other
    assert len(merged) == 1 and set(next(iter(merged.items()))) == {"steps", "batch"}
    s = ort.InferenceSession(unet.proto.SerializeToString(), providers=["CPUExecutionProvider"])
    out = s.run(
        None,
        {
            "sample": np.zeros((1, 4, 8, 8), np.float32),
            "timestep": np.array([1.0, 2.0], np.float32),
        },
    )[0]
    assert out.shape[0] == 2
    by_name = resolve_dims(unet.signature, None)
    assert by_name["steps"].value == 128  # its name alone says a sequence
    choices = fitted_dims(unet, None)
    assert choices["steps"].value == 1
    assert "broadcasts it against 'batch'" in choices["steps"].why


def test_a_guess_that_cannot_fit_is_shrunk_and_says_what_it_needed(unet: ortlab.Model) -> None:
    """At 224 x 224 the attention's scores are [1, 50176, 50176] floats: the estimate is that
    arithmetic; the guess is halved until a run fits, each side alike, the reason says what 224
    needed, and plain onnxruntime runs the shrunk shapes."""
    at = footprint_at(unet.proto, {"batch": 1, "steps": 1, "height": 224, "width": 224})
    assert at is not None and at.largest == "scores"
    assert at.largest_bytes == 1 * (224 * 224) ** 2 * 4
    free = 4 * 2**30  # as if 4 GB were free
    choices = fit_guesses(unet, resolve_dims(unet.signature, {"steps": 1}), free=free)
    h, w = choices["height"].value, choices["width"].value
    assert h == w < 224 and "shrunk from 224" in choices["height"].why
    assert "9.4 GB" in choices["height"].why  # the scores at 224 x 224
    fits = footprint_at(unet.proto, {"batch": 1, "steps": 1, "height": h, "width": w})
    assert fits is not None and fits.peak_bytes <= 0.8 * free
    assert choices["steps"].why == "given"  # a given dim is never changed
    s = ort.InferenceSession(unet.proto.SerializeToString(), providers=["CPUExecutionProvider"])
    s.run(None, {"sample": np.zeros((1, 4, h, w), np.float32), "timestep": np.ones(1, np.float32)})


def test_a_guess_nothing_can_shrink_enough_is_refused_naming_the_dims(
    unet: ortlab.Model,
) -> None:
    with pytest.raises(FeedError, match=r"guessed .*height=224, width=224.*Pass the model's real"):
        fit_guesses(unet, resolve_dims(unet.signature, {"steps": 1}), free=1000)


def test_guesses_that_fit_are_left_alone() -> None:
    m = ortlab.examples.load("resnet50")
    assert fit_guesses(m, resolve_dims(m.signature, None)) == resolve_dims(m.signature, None)
    assert merged_symbols(m.proto) == {}


def test_benchmark_runs_the_unet_at_shapes_it_chose_and_says_why(unet: ortlab.Model) -> None:
    b = ortlab.benchmark(unet, runs=2, progress=False)
    assert b.stats.count == 2
    text = b.to_text()
    assert "steps=1 (guessed: batch-like" in text


def test_inference_writes_nothing_where_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORT's infer_shapes saves 'sym_shape_infer_temp.onnx' into the working directory when it
    cannot finish; ortlab's use of it never does (a custom op it cannot infer)."""
    monkeypatch.chdir(tmp_path)
    m = ortlab.load(models.custom_domain())
    merged_symbols(m.proto)
    footprint_at(m.proto, {})
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------- a real export (issue 61, item 1)

EXPORTED = Path(__file__).parent / "data" / "unet_tiny_diffusers.onnx"
"""diffusers' UNet2DConditionModel by the TorchScript exporter (scripts/make_unet.py): its
timestep embedding multiplies two weights the exporter left unfolded, so ORT's inference asked
for their values and failed before, and the guesses ran unchecked (128 timesteps against a
batch of 1; a 224 x 224 latent: 10 TB asked of ORT's arena)."""


def test_an_exported_unets_guesses_come_from_its_graph_and_run_in_plain_onnxruntime() -> None:
    """With no feeds: 'steps' is batch-like because the graph broadcasts it (not a sequence of
    128 as its name says), height and width are shrunk until the estimate fits the memory and
    the reason says what 224 needed, and plain onnxruntime runs exactly those shapes."""
    m = ortlab.load(EXPORTED)
    merged = merged_symbols(m.proto)
    assert set(merged.items()) in ({("batch_size", "steps")}, {("steps", "batch_size")})
    free = 2 * 2**30  # as if 2 GB were free: the same on every machine, and light
    choices = fit_guesses(m, resolve_dims(m.signature, None), free=free)
    values = {n: c.value for n, c in choices.items()}
    assert values["steps"] == values["batch_size"] == 1
    assert "broadcasts it against 'batch_size'" in choices["steps"].why
    side = values["height"]
    assert side == values["width"] < 224 and "shrunk from 224" in choices["height"].why
    fits = footprint_at(m.proto, values)
    assert fits is not None and fits.peak_bytes <= 0.8 * free
    before = footprint_at(m.proto, {**values, "height": 224, "width": 224})
    assert before is not None and before.peak_bytes > 0.8 * free
    tokens = side * side  # the first self-attention's scores: heads x tokens x tokens floats
    assert fits.largest_bytes >= tokens * tokens * 4
    s = ort.InferenceSession(str(EXPORTED), providers=["CPUExecutionProvider"])
    out = s.run(
        None,
        {
            "sample": np.zeros((1, 4, side, side), np.float32),
            "timestep": np.ones(1, np.int64),
            "encoder_hidden_states": np.zeros((1, values["sequence_length"], 32), np.float32),
        },
    )[0]
    assert out.shape == (1, 4, side, side)
