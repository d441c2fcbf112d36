"""A roof is a roof (issue 47 item 1): ops ORT runs in place move no bytes, and a ceiling is
never below what a node of the model reached — so no node runs above its roof. Checked on a
diffusion UNet's block (GroupNorm via Reshape, attention) and ResNet-50, whose NCHWc
convolutions beat the plain GEMM the fp32 ceiling is measured with."""

from __future__ import annotations

import pytest

import ortlab
from ortlab.analysis.limits import ceilings
from ortlab.analysis.limits.opkinds import ALIASING
from tests import corpus, models


@pytest.mark.parametrize("name", ["unet_block", "resnet50"])
def test_no_node_runs_above_its_roof(name: str) -> None:
    ceilings.forget()  # measured afresh: a ceiling another model's node raised is not this one's
    if name == "unet_block":
        m = ortlab.load(models.unet_block())
        r = ortlab.roofline(m, dims={"height": 32, "width": 32}, runs=5, progress=False)
    else:
        m = ortlab.examples.load("resnet50")
        r = ortlab.roofline(m, runs=5, progress=False)
    _roof_holds(r)


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus.LIGHT)
def test_no_node_of_a_real_model_runs_above_its_roof(name: str) -> None:
    """Every light corpus model, at its real shapes: the same law on exports ortlab never
    built (Paddle, tf2onnx, an int8 model, an fp16 one, classic-ML ZipMaps)."""
    ceilings.forget()
    r = ortlab.roofline(corpus.path(name), None, corpus.feeds(name), runs=3, progress=False)
    _roof_holds(r)


def _roof_holds(r: ortlab.RooflineResult) -> None:
    fractions = [x.achieved_fraction for x in r.rows if x.achieved_fraction == x.achieved_fraction]
    assert fractions and max(fractions) <= 1.0 + 1e-9
    for x in r.rows:
        if x.op_type in ALIASING:
            assert x.bytes == 0 and x.bound == "", x  # one buffer: nothing to bound
    raised = [p for p in r.peaks if p.reached_by]
    for p in raised:  # the roof is the node's own rate, in every view of these settings
        row = next(x for x in r.rows if x.node == p.reached_by)
        rate = row.achieved_bytes if ceilings.is_bandwidth(p.dtype) else row.achieved_flops
        assert p.best == pytest.approx(rate)
        assert any(p.reached_by in n and "seen to do" in n for n in r.notes)
        same = ceilings.known(r.config, [p.dtype])
        assert same is not None and same[0].best == p.best
    if raised:
        assert "reached by node" in r.to_text()
