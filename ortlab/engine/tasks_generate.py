"""The worker task behind ``ortlab.generate``: a greedy generation loop in plain onnxruntime
(present -> past each step), timed per step, run several times on one session."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import RunError, error_text
from ortlab.core.machine import cpu_sample, other_cores
from ortlab.core.onnx_util import np_dtype
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.boundrun import BoundCalls, CarriedStates, DecodeInputs, Steps, masks
from ortlab.engine.encoder_step import EncoderStep
from ortlab.engine.profiled import profiled_session
from ortlab.engine.replies import GenerateReply, GenerationPair, GenerationsReply
from ortlab.engine.sessioncache import open_session, rss_bytes
from ortlab.engine.tasks import run_error
from ortlab.engine.trace import ProfileData

if TYPE_CHECKING:
    import onnxruntime as ort
    from onnxruntime import IOBinding, OrtValue

__all__ = ["GreedyLoop", "generate", "interleaved", "step_feeds"]


def step_feeds(
    info: DecoderInfo,
    ids: np.ndarray,
    past: dict[str, np.ndarray],
    past_length: int,
    dtypes: dict[str, np.dtype[np.generic]],
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


class GreedyLoop:
    """The greedy step loop on one session, as a generator runs it: one IOBinding per
    generation, each step rebinding only what changes (the new ids, the mask, the positions,
    the cache's tensors) and writing the logits into an array bound once per shape, so a step
    costs what the model does plus a few binding calls (before: a binding built per step and
    the logits copied out, ~55 µs a token on the tiny int4 decoder, issue 46)."""

    def __init__(
        self,
        sess: ort.InferenceSession,
        decoder: DecoderInfo,
        job: ModelJob,
        prompt: np.ndarray | None = None,
        *,
        encoder: EncoderStep | None = None,
    ) -> None:
        self.sess, self.decoder, self.job, self.encoder = sess, decoder, job, encoder
        self.dtypes = {i.name: np_dtype(i.type) for i in sess.get_inputs()}
        outputs = sess.get_outputs()
        self.names = [o.name for o in outputs]
        self.logits = self.names.index("logits") if "logits" in self.names else 0
        logits = outputs[self.logits]
        self.logits_dtype = np_dtype(logits.type)
        vocab = logits.shape[-1] if logits.shape else None
        self.vocab = vocab if isinstance(vocab, int) else decoder.vocab
        self.present = {p.past_key: p.present_key for p in decoder.pairs} | {
            p.past_value: p.present_value for p in decoder.pairs
        }
        self.cross = {p.past_key: p.present_key for p in decoder.cross_pairs} | {
            p.past_value: p.present_value for p in decoder.cross_pairs
        }
        self.prompt = np.asarray(job.feeds[decoder.input_ids] if prompt is None else prompt)
        self._logits: dict[int, tuple[np.ndarray, OrtValue]] = {}
        self._states: CarriedStates | None = None
        """A hybrid decoder's carried states in this generation (made at its first binding)."""
        self.state_bytes = self.prompt.shape[0] * decoder.state_bytes
        """The carried states' bytes (a fixed part of every step's cache)."""
        self._masks: tuple[int, list[OrtValue], list[object]] | None = None
        """The decode steps' masks (:func:`masks`) for the longest generation they serve, and
        what the binding takes for each (:meth:`BoundCalls.held`): made once per length."""

    def _logits_for(self, new: int) -> tuple[np.ndarray, OrtValue] | None:
        """The array the logits of a step of ``new`` tokens are written into, and its
        OrtValue (shared memory: read with no copy); a decode step's is kept for the next, a
        prefill's (prompt x vocabulary) is the step's own. None when the vocabulary is
        unknown (ORT allocates)."""
        if not self.vocab:
            return None
        if new in self._logits:
            return self._logits[new]
        import onnxruntime as ort

        array = np.empty((self.prompt.shape[0], new, self.vocab), dtype=self.logits_dtype)
        made = (array, ort.OrtValue.ortvalue_from_numpy(array))
        if new == 1:
            self._logits[new] = made
        return made

    def _empty_cache(self, binding: ort.IOBinding, batch: int, shared: int) -> dict[str, OrtValue]:
        """The past inputs of a first step (no token cached; with ``shared``, one buffer per
        pair that long, bound once as both past and present; a windowed layer's buffer is its
        fixed slots either way, as onnxruntime-genai allocates it)."""
        import onnxruntime as ort

        d = self.decoder
        past: dict[str, OrtValue] = {
            name: ort.OrtValue.ortvalue_from_numpy(
                np.zeros(d.past_shape(name, batch, shared), dtype=self.dtypes[name])
            )
            for name in d.past_inputs
        }
        if shared:
            for name, value in past.items():
                binding.bind_ortvalue_input(name, value)
                binding.bind_ortvalue_output(self.present[name], value)
        self._states = None  # a generation's carried states start at zero: made anew
        return past

    def _bind_outputs(
        self,
        binding: IOBinding,
        new: int,
        past: dict[str, OrtValue],
        bound: OrtValue | None,
        *,
        shared: int,
    ) -> tuple[tuple[np.ndarray, OrtValue] | None, OrtValue | None]:
        """A step's logits (an array bound once per shape: the prefill's, then decode's;
        ``bound`` is the one bound now) and, without a shared buffer, its past as inputs and
        its presents for ORT to allocate. Returns the logits' array and what is bound."""
        logits = self._logits_for(new)
        if logits is None:
            binding.bind_output(self.names[self.logits])
        elif logits[1] is not bound:
            binding.bind_ortvalue_output(self.names[self.logits], logits[1])
            bound = logits[1]
        if not shared:
            for name, value in past.items():
                binding.bind_ortvalue_input(name, value)
                binding.bind_output(self.present[name])
        if self._states is None and self.decoder.states:  # bound after the logits and the
            batch = self.prompt.shape[0]  # presents, which keep their places in the outputs
            self._states = CarriedStates(self.decoder, self.dtypes, batch, binding)
        return logits, bound

    def _swap_states(self) -> None:
        """After a run: a hybrid decoder's carried states it wrote are the next step's."""
        if self._states is not None:
            self._states.swap()

    def _decode_inputs(
        self, binding: IOBinding, calls: BoundCalls, batch: int, longest: int
    ) -> DecodeInputs:
        """A generation's decode inputs, its masks made once for the latest ``longest``."""
        mask = self.decoder.mask
        if mask and (self._masks is None or self._masks[0] != longest):
            made = masks(batch, longest, self.dtypes[mask])
            self._masks = (longest, made, [calls.held(m) for m in made])
        return DecodeInputs(
            self.decoder,
            self.dtypes,
            batch,
            binding,
            calls,
            masks=self._masks[1:] if mask and self._masks is not None else None,
        )

    def _next_past(
        self, past: dict[str, OrtValue], got: list[OrtValue]
    ) -> tuple[dict[str, OrtValue], int]:
        """Without a shared buffer: a step's present outputs (after its logits) as the next
        step's past, and their bytes."""
        past = dict(zip(past, got[1 : 1 + len(past)], strict=True))
        return past, _cache_bytes(past, self.dtypes) + self.state_bytes

    def _bind_given(
        self, binding: IOBinding, ids: np.ndarray, length: int
    ) -> dict[str, np.ndarray]:
        """Bind a prompt's or a chunk's feeds (on ``length`` cached tokens); returns them."""
        feeds = step_feeds(self.decoder, ids, {}, length, self.dtypes)
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        return feeds

    def _failed(self, err: Exception, feeds: dict[str, np.ndarray]) -> RunError:
        """A step's failed run, said with the arrays it fed (:func:`run_error`)."""
        return run_error(err, self.job.model_name, self.job.config, feeds)

    def _start_cross(self, binding: IOBinding, batch: int) -> None:
        """An encoder-decoder's first step: its cross-attention past empty (the step's present
        computes it from the encoder's states); the present outputs bound for ORT to allocate
        (bound last: :meth:`_keep_cross` reads them at the end of the outputs)."""
        d = self.decoder
        for past, present in self.cross.items():
            empty = np.zeros((batch, d.kv_heads, 0, d.head_size), dtype=self.dtypes[past])
            binding.bind_cpu_input(past, empty)
            binding.bind_output(present)

    def _keep_cross(self, binding: IOBinding, got: list[OrtValue]) -> None:
        """After the first step: its cross-attention presents become the past of every step
        after (the with-past branch of optimum's merged decoder returns a dummy in their
        place, never fed back: bound afresh here, since the binding would hold the first
        step's present as the output to write, and the next steps' dummies all have one
        shape)."""
        for past, value in zip(self.cross, got[-len(self.cross) :], strict=True):
            binding.bind_ortvalue_input(past, value)
            binding.bind_output(self.cross[past])

    def run(self, steps: int, progress: Callable[[int], None], *, shared: int = 0) -> Steps:
        """One generation of ``steps`` steps after the prompt (:meth:`run_steps`)."""
        plan: list[np.ndarray | None] = [self.prompt, *([None] * (steps - 1))]
        return self.run_steps(plan, progress, shared=shared)

    def run_steps(  # noqa: PLR0915 - one loop of a step's parts, in order (issue 64 splits it)
        self, plan: list[np.ndarray | None], progress: Callable[[int], None], *, shared: int = 0
    ) -> Steps:
        """One generation from an empty cache, a step per item of ``plan``: ids to feed
        ([batch, new]: a prompt, or a chunk on top of what is cached) or None (the argmax of
        the step before, a decode step). Each step is timed whole as a generator runs it (its
        feeds, the run, the logits' argmax and the next step's ids and cache:
        onnxruntime-genai's quantity) and the model's own run within it; the tokens and the
        cache's bytes after each step (the present outputs'; with ``shared``, the buffers of
        that many tokens every step writes into: past_present_share_buffer, as
        onnxruntime-genai runs a builder model, GroupQueryAttention writing each step's keys
        and values in place)."""
        batch, binding = self.prompt.shape[0], self.sess.io_binding()
        longest = sum(1 if ids is None else ids.shape[1] for ids in plan)
        past = self._empty_cache(binding, batch, shared)
        held = _cache_bytes(past, self.dtypes) + self.state_bytes
        nxt: np.ndarray | np.integer = self.prompt  # the next step's ids
        calls = BoundCalls(self.sess, binding)
        steady = self._decode_inputs(binding, calls, batch, longest)
        logits, bound, settled, length = None, None, False, 0
        clock = time.perf_counter_ns
        # an encoder-decoder's encoder: once, before the decoder's first step (part of TTFT)
        out = Steps(
            encoder=self.encoder.run(binding, self.dtypes) if self.encoder is not None else None
        )
        crossing, step = bool(self.cross), 0
        while step < len(plan):
            given = plan[step]
            if given is None and settled and batch == 1:  # the loop's hot path
                count = _decode_run(plan, step)
                length = steady.run_settled(
                    logits[0],  # type: ignore[index]
                    count,
                    out,
                    at=(step, length, nxt),
                    fail=lambda err, at: self._failed(err, steady.feeds(at)),
                    progress=progress,
                    after=self._swap_states if self.decoder.states else None,
                )
                nxt, step = steady.ids[0, 0], step + count
                continue
            start = clock()
            if given is not None:  # a prompt or a chunk: its own feeds
                new, feeds = given.shape[1], self._bind_given(binding, given, length)
                steady.bound = settled = False
            else:  # a decode step: the same arrays, rewritten in place
                new = 1
                steady.feed(nxt, length)
            if not settled:  # outputs as the step before bound them, on a shared cache
                logits, bound = self._bind_outputs(binding, new, past, bound, shared=shared)
                settled = given is None and bool(shared) and logits is not None
            if crossing and step == 0:
                self._start_cross(binding, batch)
            t0 = clock()
            try:
                calls.run()
            except Exception as err:
                feeds = feeds if given is not None else steady.feeds(length)
                raise self._failed(err, feeds) from err
            t1 = clock()
            length += new
            self._swap_states()
            got = None if logits is not None and shared else binding.get_outputs()
            scores = logits[0] if logits is not None else got[0].numpy()  # type: ignore[index]
            nxt = _next_ids(scores, batch, new)
            if not shared:  # the present outputs become the next step's past
                past, held = self._next_past(past, got)  # type: ignore[arg-type]
            if crossing and step == 0:
                self._keep_cross(binding, got)  # type: ignore[arg-type]
            token = int(nxt) if batch == 1 else int(nxt[0, 0])  # type: ignore[index]
            out.record(clock() - start, t1 - t0, token, held)
            step += 1
            progress(step)
        return out


def _cache_bytes(past: dict[str, OrtValue], dtypes: dict[str, np.dtype[np.generic]]) -> int:
    """The cache's bytes: each OrtValue's shape by its input's element size (no copy)."""
    return sum(math.prod(v.shape()) * dtypes[name].itemsize for name, v in past.items())


def _next_ids(scores: np.ndarray, batch: int, new: int) -> np.ndarray | np.integer:
    """The next ids from a step's logits ([batch, new, vocabulary]): a scalar for one
    sequence (written into the bound [1, 1] ids; a decode step's logits need no view for
    it), else [batch, 1]."""
    if batch > 1:
        return scores[:, -1].argmax(-1)[:, None]  # type: ignore[no-any-return]
    return scores.argmax() if new == 1 else scores[0, -1].argmax()


def _decode_run(plan: list[np.ndarray | None], step: int) -> int:
    """How many decode steps (None) stand in a row from ``step`` in ``plan``."""
    end = step
    while end < len(plan) and plan[end] is None:
        end += 1
    return end - step


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
