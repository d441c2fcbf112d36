"""A generation's split by layer is each node's median over enough profiled runs that two
layers built alike split alike, from the first call in a fresh worker (issue 62 item 6: the
first Whisper generation in a worker split two identical layers 72 % / 5.5 %, from three
samples of its once-a-generation phases)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ortlab
from ortlab.analysis.generation.split import phase_runs, run_step
from ortlab.engine.tasks_generate import FIRST_SAMPLES, PROFILED_REPS
from ortlab.engine.trace import per_run_grid
from ortlab.engine.worker import get_worker


def _matched(t: object, phase: str) -> tuple[int, float, float]:
    """The nodes of layer 0 whose twin (the same name in layer 1) ran too: how many, and the
    two layers' summed time over them."""
    import pandas as pd

    assert isinstance(t, pd.DataFrame)
    p = t[t["phase"] == phase]
    us = dict(zip(p["node"], p["us_per_step"], strict=True))
    twin = {n: re.sub(r"layers\.0([./])", r"layers.1\1", n) for n in us if "layers.0" in n}
    pairs = [(a, b) for a, b in twin.items() if b != a and b in us]
    return len(pairs), sum(us[a] for a, _ in pairs), sum(us[b] for _, b in pairs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_whisper", "tiny_whisper_genai"])
def test_the_first_generation_in_a_worker_splits_twin_layers_alike(name: str) -> None:
    """In a fresh worker, the first generation's encoder, prefill and decode each give layer
    0's nodes and their layer-1 twins (the same ops on the same shapes) times within 1.6x of
    each other (measured here: within 1.3x idle, 1.22x with a core busy; the defect was
    13x). The once-a-generation phases are medians of FIRST_SAMPLES profiled runs: the
    trace's extra runs are prefills (the same kernels as generation 0's), and the encoder's
    trace has one run per profiled first step.

    At one intra-op thread: with two threads and the machine's other core busy, the first
    parallel kernel of each step waits for the pool's parked threads to be scheduled again, and
    that wait lands in layer 0 (CI read its prefill 8x layer 1's, and 3-6x in 2 of 4 runs
    here); the pool's wake-up is not what this checks (five runs of one thread with a core
    busy all passed)."""
    get_worker().stop()
    m = ortlab.examples.load(name)
    g = ortlab.generate(m, {"intra_op_threads": 1}, new_tokens=8, progress=False)
    t = g.by_phase()
    for phase in ("encoder", "prefill", "decode"):
        n, a, b = _matched(t, phase)
        assert n >= 5, (phase, n)
        assert max(a, b) / min(a, b) < 1.6, (phase, a, b)
    d, e = g.profile, g.encoder_profile
    assert d is not None and e is not None and g.first_steps == FIRST_SAMPLES - PROFILED_REPS
    assert len(d.run_us) == PROFILED_REPS * g.profiled_steps + g.first_steps
    assert len(e.run_us) == FIRST_SAMPLES
    steps = [run_step(g.timeline, k) for k in range(len(d.run_us))]
    assert steps[-g.first_steps :] == [(PROFILED_REPS + j, 0) for j in range(g.first_steps)]
    grid = per_run_grid(d) > 0
    first = grid[:, 0]
    for k, (_, step) in enumerate(steps):  # every prefill ran generation 0's prefill kernels
        assert step != 0 or np.array_equal(grid[:, k], first), k
    if name == "tiny_whisper":  # a merged decoder: its decode steps run the If's other branch
        assert not np.array_equal(grid[:, 1], first)
    kept = phase_runs(g.timeline)["prefill"]  # outliers may leave (more on a busy machine)
    assert kept and all(steps[k][1] == 0 for k in kept)
