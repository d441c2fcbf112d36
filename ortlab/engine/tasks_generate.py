"""The worker task behind ``ortlab.generate``: a greedy generation loop in plain onnxruntime
(present -> past each step), timed per step, run several times on one session."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import RunError, error_text
from ortlab.core.machine import cpu_sample, other_cores
from ortlab.core.onnx_util import np_dtype
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.replies import GenerateReply, GenerationPair, GenerationsReply
from ortlab.engine.tasks import open_session, rss_bytes, run_error
from ortlab.engine.trace import ProfileData

__all__ = ["generate", "interleaved", "step_feeds"]


def step_feeds(
    info: DecoderInfo,
    ids: np.ndarray,
    past: dict[str, np.ndarray],
    past_length: int,
    dtypes: dict[str, np.dtype[Any]],
) -> dict[str, np.ndarray]:
    """One step's feeds: ``ids`` ([batch, new]) after ``past_length`` cached tokens held in
    ``past`` (name -> [batch, kv heads, past, head size]); the mask, positions and an optimum
    merged decoder's branch follow from them."""
    batch, new = ids.shape
    feeds: dict[str, np.ndarray] = {info.input_ids: ids.astype(dtypes[info.input_ids])}
    if info.mask:
        feeds[info.mask] = np.ones((batch, past_length + new), dtype=dtypes[info.mask])
    if info.positions:
        pos = np.arange(past_length, past_length + new, dtype=dtypes[info.positions])
        feeds[info.positions] = np.broadcast_to(pos, (batch, new)).copy()
    if info.use_cache_branch:
        feeds[info.use_cache_branch] = np.array([past_length > 0], dtype=bool)
    feeds.update(past)
    return feeds


WARMUP_STEPS = 2
"""Untimed steps of one generation before the timed (or profiled) ones, in the same session:
the prefill and one decode step, each kind's first run."""
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
) -> GenerateReply:
    """``runs`` greedy generations of ``new_tokens`` tokens after the prompt in ``job.feeds``
    (its ``input_ids``), after an untimed one of :data:`WARMUP_STEPS` steps: the first step is
    the prefill (empty cache), each next step feeds the
    argmax token with the previous step's present outputs as its past. Times each step's
    ``sess.run`` (ns), the tokens, the present outputs' bytes after each step, and the
    process's resident memory before and after the first generation. With ``profile``, one
    more generation runs in a session with ORT's profiler on (after its own warm-up), over
    as many steps as keep its trace under :data:`PROFILE_EVENTS` node events (``nodes``: the
    model's, bodies included, one event each per step). ``shared``: the
    cache is one buffer per pair that long, past and present alike (genai's buffer sharing)."""
    sess, report, _ = open_session(job.model_path, job.model_name, job.config)
    loop = _Loop(sess, decoder, job)
    since = cpu_sample()
    steps_ns: list[list[int]] = []
    tokens: list[list[int]] = []
    present_bytes: list[int] = []
    rss: list[int] = [rss_bytes()]
    total = runs * new_tokens + (new_tokens if profile else 0)
    # a fresh session's first steps pay one-time costs (its first run ~3x a warm prefill, the
    # arena's first allocations): WARMUP_STEPS untimed steps first, as the profiled run does
    loop.run(min(WARMUP_STEPS, new_tokens), lambda _k: None, shared=shared)
    for r in range(runs):
        step = _offset(progress, r * new_tokens, total)
        times, made, sizes = loop.run(new_tokens, step, shared=shared)
        if r == 0:
            rss.append(rss_bytes())
            present_bytes = sizes
        steps_ns.append(times)
        tokens.append(made)
    if any(t != tokens[0] for t in tokens[1:]):
        raise RunError(
            f"Greedy generation of {job.model_name!r} gave different tokens from run to run: "
            "the model is not deterministic on these inputs."
        )
    load = other_cores(since, cpu_sample())
    data, window = None, 0
    if profile:
        window = max(1, min(new_tokens, PROFILE_EVENTS // max(nodes, 1)))
        data = _profiled(
            job, decoder, window, _offset(progress, runs * new_tokens, total), shared=shared
        )
    return GenerateReply(
        steps_ns=steps_ns,
        tokens=tokens[0],
        present_bytes=present_bytes,
        rss_before=rss[0],
        rss_after=rss[-1],
        report=report,
        other_cores=None if np.isnan(load) else round(float(load), 2),
        profile=data,
        profiled_steps=window,
    )


def interleaved(
    progress: Progress,
    job: ModelJob,
    *,
    decoder: DecoderInfo,
    shared: int,
    items: list[tuple[str, str, SessionConfig, int]],
    new_tokens: int,
    rounds: int,
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
    base = _Loop(sess, decoder, job)
    base.run(min(WARMUP_STEPS, new_tokens), lambda _k: None, shared=shared)
    pairs: list[GenerationPair | None] = []
    failed: dict[int, str] = {}
    total = max(len(items), 1) * rounds
    for k, (path, name, config, length) in enumerate(items):
        try:
            other, report, _ = open_session(path, name, config)
            loop = _Loop(other, decoder, job)
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
                steps, tokens, _ = runner.run(new_tokens, lambda _k: None, shared=cache)
                times[side].append(steps)
                made.setdefault(side, tokens)
            progress(k * rounds + r + 1, total)
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


def _offset(progress: Progress, done: int, total: int) -> Callable[[int], None]:
    """A generation's step counter as the call's progress (``done`` steps before it)."""

    def step(k: int) -> None:
        progress(done + k, total)

    return step


class _Loop:
    """The greedy step loop on one session."""

    def __init__(self, sess: Any, decoder: DecoderInfo, job: ModelJob) -> None:
        self.sess, self.decoder, self.job = sess, decoder, job
        self.dtypes = {i.name: np_dtype(i.type) for i in sess.get_inputs()}
        names = [o.name for o in sess.get_outputs()]
        self.logits = names.index("logits") if "logits" in names else 0
        self.present = {p.past_key: names.index(p.present_key) for p in decoder.pairs} | {
            p.past_value: names.index(p.present_value) for p in decoder.pairs
        }
        self.prompt = np.asarray(job.feeds[decoder.input_ids])

    def run(
        self, steps: int, progress: Callable[[int], None], *, shared: int = 0
    ) -> tuple[list[int], list[int], list[int]]:
        """One generation: per step its time (ns), the token, the cache's bytes (the present
        outputs'; with ``shared``, the buffers of that many tokens every step writes into)."""
        if shared:
            return self._shared(steps, progress, shared)
        d, batch = self.decoder, self.prompt.shape[0]
        past = {
            name: np.zeros((batch, d.kv_heads, 0, d.head_size), dtype=self.dtypes[name])
            for name in d.past_inputs
        }
        ids, length = self.prompt, 0
        clock = time.perf_counter_ns
        times: list[int] = []
        made: list[int] = []
        sizes: list[int] = []
        for step in range(steps):
            feeds = step_feeds(d, ids, past, length, self.dtypes)
            t0 = clock()
            try:
                outs = self.sess.run(None, feeds)
            except Exception as err:
                raise run_error(err, self.job.model_name, self.job.config, feeds) from err
            times.append(clock() - t0)
            length += ids.shape[1]
            nxt = np.asarray(outs[self.logits])[:, -1, :].argmax(axis=-1)
            made.append(int(nxt[0]))
            past = {name: outs[k] for name, k in self.present.items()}
            sizes.append(sum(int(v.nbytes) for v in past.values()))
            ids = nxt.reshape(batch, 1)
            progress(step + 1)
        return times, made, sizes

    def _shared(
        self, steps: int, progress: Callable[[int], None], longest: int
    ) -> tuple[list[int], list[int], list[int]]:
        """As onnxruntime-genai runs a builder model with past_present_share_buffer: one
        buffer per past/present pair, ``longest`` tokens long, bound through IOBinding as both
        the past input and the present output; GroupQueryAttention writes each step's keys and
        values in place at the length the mask gives."""
        import onnxruntime as ort

        d, batch = self.decoder, self.prompt.shape[0]
        names = [o.name for o in self.sess.get_outputs()]
        buffers = {
            name: ort.OrtValue.ortvalue_from_numpy(
                np.zeros((batch, d.kv_heads, longest, d.head_size), dtype=self.dtypes[name])
            )
            for name in d.past_inputs
        }
        held = sum(int(np.prod(v.shape())) * self.dtypes[n].itemsize for n, v in buffers.items())
        ids, length = self.prompt, 0
        clock = time.perf_counter_ns
        times: list[int] = []
        made: list[int] = []
        for step in range(steps):
            feeds = step_feeds(d, ids, {}, length, self.dtypes)
            binding = self.sess.io_binding()
            for name, value in feeds.items():
                binding.bind_cpu_input(name, value)
            binding.bind_output(names[self.logits])  # outputs come back in binding order
            for name, value in buffers.items():
                binding.bind_ortvalue_input(name, value)
                binding.bind_ortvalue_output(names[self.present[name]], value)
            t0 = clock()
            try:
                self.sess.run_with_iobinding(binding)
            except Exception as err:
                raise run_error(err, self.job.model_name, self.job.config, feeds) from err
            times.append(clock() - t0)
            length += ids.shape[1]
            logits = binding.get_outputs()[0].numpy()
            nxt = logits[:, -1, :].argmax(axis=-1)
            made.append(int(nxt[0]))
            ids = nxt.reshape(batch, 1)
            progress(step + 1)
        return times, made, [held] * steps


def _profiled(
    job: ModelJob,
    decoder: DecoderInfo,
    steps: int,
    progress: Callable[[int], None],
    *,
    shared: int,
) -> ProfileData:
    """One generation of ``steps`` steps with ORT's profiler on, after a warm-up of
    :data:`WARMUP_STEPS` steps in the same session (dropped from the trace): run k of the
    trace is step k."""
    from ortlab.engine.session import build_session
    from ortlab.engine.tasks import with_load
    from ortlab.engine.trace import parse_profile_file

    with cache.temp_dir("generate-") as folder:
        since = cpu_sample()
        sess, _ = build_session(
            job.model_path,
            job.config,
            model_name=job.model_name,
            profile_prefix=str(folder / "ortlab"),
        )
        loop = _Loop(sess, decoder, job)
        try:
            loop.run(min(WARMUP_STEPS, steps), lambda _k: None, shared=shared)
            loop.run(steps, progress, shared=shared)
        finally:
            path = sess.end_profiling()
        return with_load(parse_profile_file(path, skip_runs=min(WARMUP_STEPS, steps)), since)
