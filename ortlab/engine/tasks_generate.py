"""The worker task behind ``ortlab.generate``: a greedy generation loop in plain onnxruntime
(present -> past each step), timed per step, run several times on one session."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import RunError, error_text
from ortlab.core.machine import cpu_sample, other_cores
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.encoder_step import EncoderStep
from ortlab.engine.greedyloop import GreedyLoop
from ortlab.engine.profiled import profiled_session
from ortlab.engine.replies import GenerateReply, GenerationPair, GenerationsReply
from ortlab.engine.sessioncache import open_session, rss_bytes
from ortlab.engine.trace import ProfileData

if TYPE_CHECKING:
    pass

__all__ = ["generate", "interleaved"]


WARMUP_STEPS = 2
"""Untimed steps of one generation before the timed (or profiled) ones, in the same session:
the prefill and one decode step, each kind's first run."""
MIN_TIMED_NS = 1_000_000_000
"""The timed generations go on past ``runs`` until their timed steps add up to a second (at most
:data:`MAX_RUNS`): six generations of a small decoder take ~0.1 s, so one hiccup of a busy
machine (a scheduler's slice, another process's burst) was a large part of the sample."""
MAX_RUNS = 200
"""The most timed generations one call makes to fill :data:`MIN_TIMED_NS`."""
PROFILED_REPS = 3
FIRST_SAMPLES = 9
"""Profiled runs of the once-a-generation steps (an encoder's run, the prefill): after the
:data:`PROFILED_REPS` generations, that many more of their first step alone, so a phase with
one step per generation is a median of 9, not 3 (one stalled run of 3 moved a layer's share
from half to a quarter on a busy machine)."""
"""Profiled generations per call: a phase's split is each node's median over them (and over
decode steps), so one stalled step is not the model's physics (issue 46)."""
PROFILE_EVENTS = 800_000
"""Node events a profiled generation may record: ORT's profiler stops at 1,000,000, which a
generation reaches after a few thousand tokens of a large model."""


def generate(
    progress: Progress,
    job: ModelJob,
    *,
    decoder: DecoderInfo,
    new_tokens: int,
    runs: int,
    profile: bool = True,
    shared: int = 0,
    nodes: int = 1,
    encoder: ModelJob | None = None,
) -> GenerateReply:
    """``runs`` greedy generations of ``new_tokens`` tokens after the prompt in ``job.feeds``
    (its ``input_ids``), more until they span :data:`MIN_TIMED_NS`, after an untimed one of
    :data:`WARMUP_STEPS` steps: the first step is
    the prefill (empty cache), each next step feeds the
    argmax token with the previous step's present outputs as its past. Times each step's
    ``sess.run`` (ns), the tokens, the present outputs' bytes after each step, and the
    process's resident memory before and after the first generation. With ``profile``, one
    more generation runs in a session with ORT's profiler on (after its own warm-up), over
    as many steps as keep its trace under :data:`PROFILE_EVENTS` node events (``nodes``: the
    model's, bodies included, one event each per step). ``shared``: the
    cache is one buffer per pair that long, past and present alike (genai's buffer sharing).
    ``encoder``: an encoder-decoder's encoder and its feeds, run once at the start of each
    generation (its times apart: ``encoder_ns``; profiled in its own session)."""
    sess, report, _ = open_session(job.model_path, job.model_name, job.config)
    loop = GreedyLoop(sess, decoder, job, encoder=_encoder_step(encoder, decoder))
    steps_ns: list[list[int]] = []
    run_ns: list[list[int]] = []
    encoder_ns: list[tuple[int, int]] = []
    tokens: list[list[int]] = []
    present_bytes: list[int] = []
    rss: list[int] = [rss_bytes()]
    firsts = FIRST_SAMPLES - PROFILED_REPS
    window = (
        max(1, min(new_tokens, (PROFILE_EVENTS // max(nodes, 1) - firsts) // PROFILED_REPS))
        if profile
        else 0
    )
    said = _Throttle(progress, runs * new_tokens + window * PROFILED_REPS + firsts)
    # a fresh session's first steps pay one-time costs (its first run ~3x a warm prefill, the
    # arena's first allocations): WARMUP_STEPS untimed steps first, as the profiled run does
    loop.run(min(WARMUP_STEPS, new_tokens), lambda _k: None, shared=shared)
    since = cpu_sample()  # the load while the timed runs ran
    timed, r = 0, 0  # the timed steps' own time: what the figures' sample is made of
    while r < runs or (timed < MIN_TIMED_NS and r < MAX_RUNS):
        if r >= runs:  # a run beyond those asked for: the bar's total grows by it
            said.total += new_tokens
        done = loop.run(new_tokens, said.offset(r * new_tokens), shared=shared)
        if r == 0:
            rss.append(rss_bytes())
            present_bytes = done.cache_bytes
        steps_ns.append(done.step_ns)
        timed += sum(done.step_ns)
        run_ns.append(done.run_ns)
        tokens.append(done.tokens)
        if done.encoder is not None:
            encoder_ns.append((done.encoder.step_ns, done.encoder.run_ns))
        r += 1
    if any(t != tokens[0] for t in tokens[1:]):
        raise RunError(
            f"Greedy generation of {job.model_name!r} gave different tokens from run to run: "
            "the model is not deterministic on these inputs."
        )
    load = other_cores(since, cpu_sample())
    data = encoder_data = None
    if profile:
        data, encoder_data = _profiled(
            job,
            decoder,
            window,
            lambda rep: said.offset(r * new_tokens + rep * window),
            shared=shared,
            encoder=encoder,
        )
    return GenerateReply(
        steps_ns=steps_ns,
        run_ns=run_ns,
        tokens=tokens[0],
        present_bytes=present_bytes,
        rss_before=rss[0],
        rss_after=rss[-1],
        report=report,
        other_cores=None if np.isnan(load) else round(float(load), 2),
        profile=data,
        profiled_steps=window,
        profiled_reps=PROFILED_REPS if profile else 0,
        first_steps=FIRST_SAMPLES - PROFILED_REPS if profile else 0,
        encoder_ns=[e[0] for e in encoder_ns],
        encoder_run_ns=[e[1] for e in encoder_ns],
        encoder_profile=encoder_data,
    )


def _encoder_step(encoder: ModelJob | None, decoder: DecoderInfo) -> EncoderStep | None:
    """The encoder's cached session and feeds, as a generation's first part (None: a decoder
    alone)."""
    if encoder is None:
        return None
    sess, _, _ = open_session(encoder.model_path, encoder.model_name, encoder.config)
    return EncoderStep(sess, dict(encoder.feeds), decoder)


def interleaved(
    progress: Progress,
    job: ModelJob,
    *,
    decoder: DecoderInfo,
    shared: int,
    items: list[tuple[str, str, SessionConfig, int]],
    new_tokens: int,
    rounds: int,
    encoder: ModelJob | None = None,
) -> GenerationsReply:
    """Each candidate in ``items`` (model path, name, config, shared buffer length) against
    ``job``'s model and config (the baseline, its cache ``shared`` as :func:`generate` takes
    it), in pairs: after one warm-up generation each, ``rounds`` rounds of one greedy
    generation of ``new_tokens`` tokens after ``job``'s prompt each, in the orders A B, B A, …
    (drift cancels). Two sessions at a time: the pair's. A candidate that cannot be built or
    run is a ``failed`` entry (its index in ``items``); the others go on. The baseline's
    failure raises."""
    since = cpu_sample()
    sess, base_report, _ = open_session(job.model_path, job.model_name, job.config)
    base = GreedyLoop(sess, decoder, job, encoder=_encoder_step(encoder, decoder))
    base.run(min(WARMUP_STEPS, new_tokens), lambda _k: None, shared=shared)
    pairs: list[GenerationPair | None] = []
    failed: dict[int, str] = {}
    said = _Throttle(progress, max(len(items), 1) * rounds)
    for k, (path, name, config, length) in enumerate(items):
        try:
            other, report, _ = open_session(path, name, config)
            mine = dataclasses.replace(encoder, config=config) if encoder else None
            loop = GreedyLoop(other, decoder, job, encoder=_encoder_step(mine, decoder))
            loop.run(min(WARMUP_STEPS, new_tokens), lambda _k: None, shared=length)
        except Exception as err:  # noqa: BLE001 - one candidate fails, not the comparison
            failed[k] = error_text(err)
            pairs.append(None)
            continue
        times: dict[int, list[list[int]]] = {0: [], 1: []}
        made: dict[int, list[int]] = {}
        for r in range(rounds):
            for side in (0, 1) if r % 2 == 0 else (1, 0):
                runner, cache = (base, shared) if side == 0 else (loop, length)
                done = runner.run(new_tokens, lambda _k: None, shared=cache)
                first = done.encoder.step_ns if done.encoder else 0  # part of the first token
                times[side].append([done.step_ns[0] + first, *done.step_ns[1:]])
                made.setdefault(side, done.tokens)
            said.at(k * rounds + r + 1)
        pairs.append(
            GenerationPair(
                base_prefill_ns=[s[0] for s in times[0]],
                base_decode_ns=[sum(s[1:]) for s in times[0]],
                prefill_ns=[s[0] for s in times[1]],
                decode_ns=[sum(s[1:]) for s in times[1]],
                base_tokens=made[0],
                tokens=made[1],
                report=report,
            )
        )
    load = other_cores(since, cpu_sample())
    return GenerationsReply(
        pairs=pairs,
        report=base_report,
        failed=failed,
        other_cores=None if np.isnan(load) else round(float(load), 2),
    )


REPORT_EVERY_NS = 1_000_000_000
"""A generation says how far it got at most once a second (and at its end): a message per
token crossed the worker's pipe between timed steps (and woke the caller, its server and a
browser to relay it), slowing a fast decoder by ~14 % (issue 46)."""


class _Throttle:
    """A call's progress, said at most once a :data:`REPORT_EVERY_NS` and at its last step:
    ``at(done)`` between steps. A message at each run's end still crossed the pipe ~100 times a
    second on a fast decoder, and the caller, its server and a browser relaying each one
    took the core the next timed run needed (the Lab's tab read 0.3-0.6x a script's)."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.total = progress, total
        self.last = time.perf_counter_ns()

    def at(self, done: int) -> None:
        now = time.perf_counter_ns()
        if done >= self.total or now - self.last >= REPORT_EVERY_NS:
            self.last = now
            self.progress(done, self.total)

    def offset(self, before: int) -> Callable[[int], None]:
        """A generation's step counter (``before`` steps ahead of it) as the call's."""
        return lambda k: self.at(before + k)


def _profiled(
    job: ModelJob,
    decoder: DecoderInfo,
    steps: int,
    progress: Callable[[int], Callable[[int], None]],
    *,
    shared: int,
    encoder: ModelJob | None = None,
) -> tuple[ProfileData, ProfileData | None]:
    """:data:`PROFILED_REPS` generations of ``steps`` steps with ORT's profiler on, after a
    warm-up of :data:`WARMUP_STEPS` steps in the same session (dropped from the trace): run
    k of the trace is step k % steps of generation k // steps; then ``FIRST_SAMPLES -
    PROFILED_REPS`` generations of their first step alone (the prefill, after the encoder).
    ``progress(rep)`` is that generation's step counter. An encoder runs in its own profiled
    session (run k of its trace: generation k's encoder, the first-step ones included)."""
    warm = min(WARMUP_STEPS, steps)
    with contextlib.ExitStack() as stack:
        sess, trace = stack.enter_context(profiled_session(job, "generate-", skip_runs=warm))
        step = None
        if encoder is not None:
            enc, enc_trace = stack.enter_context(profiled_session(encoder, "encoder-", skip_runs=1))
            step = EncoderStep(enc, dict(encoder.feeds), decoder)
        loop = GreedyLoop(sess, decoder, job, encoder=step)
        loop.run(warm, lambda _k: None, shared=shared)
        for rep in range(PROFILED_REPS):
            loop.run(steps, progress(rep), shared=shared)
        last = progress(PROFILED_REPS)
        for k in range(FIRST_SAMPLES - PROFILED_REPS):
            loop.run(1, lambda _j: None, shared=shared)
            last(k + 1)
    return trace[0], (enc_trace[0] if encoder is not None else None)
