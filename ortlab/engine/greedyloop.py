"""The greedy step loop a generator runs on one session (:class:`GreedyLoop`), one
generation's state as its steps carry it (:class:`Generation`) and one step's feeds
(:func:`step_feeds`): what ``tasks_generate`` times and profiles and ``tasks_bench`` measures."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import RunError
from ortlab.core.onnx_util import np_dtype
from ortlab.core.run import ModelJob
from ortlab.engine.boundrun import BoundCalls, CarriedStates, DecodeInputs, Ids, Steps, masks
from ortlab.engine.encoder_step import EncoderStep
from ortlab.engine.tasks import run_error

if TYPE_CHECKING:
    import onnxruntime as ort
    from onnxruntime import IOBinding, OrtValue


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


@dataclass
class Generation:
    """One generation's state as its steps carry it (:meth:`GreedyLoop.run_steps`)."""

    binding: IOBinding
    calls: BoundCalls
    steady: DecodeInputs
    """The decode steps' inputs, bound once and rewritten in place."""
    past: dict[str, OrtValue]
    """The cache as the next step reads it (without a shared buffer: the last presents)."""
    held: int
    """The cache's bytes after the last step."""
    ids: Ids
    """The next step's ids: the prompt's, then the argmax of each step's logits."""
    batch: int
    shared: int
    """The shared buffer's tokens (past_present_share_buffer); 0: none."""
    length: int = 0
    """Tokens cached."""
    logits: tuple[np.ndarray, OrtValue] | None = None
    """The array the last step's logits were written into, and its OrtValue (None: ORT
    allocated them)."""
    bound: OrtValue | None = None
    """The logits' OrtValue bound now."""
    settled: np.ndarray | None = None
    """The decode logits' array once a shared cache and the logits are bound for good: the
    settled decode loop runs on it; None until then and after a prompt or a chunk."""


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

    def run_steps(
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
        and values in place).

        Two kinds of step share one :class:`Generation`: a bound step (:meth:`step`: a prompt,
        a chunk, or a decode step whose outputs must be bound again) and, once a shared cache
        and the logits' array are bound for good, the settled decode loop of one sequence
        (``DecodeInputs.run_settled``, the loop's hot path)."""
        batch, binding = self.prompt.shape[0], self.sess.io_binding()
        longest = sum(1 if ids is None else ids.shape[1] for ids in plan)
        calls = BoundCalls(self.sess, binding)
        past = self._empty_cache(binding, batch, shared)
        gen = Generation(
            binding=binding,
            calls=calls,
            steady=self._decode_inputs(binding, calls, batch, longest),
            past=past,
            held=_cache_bytes(past, self.dtypes) + self.state_bytes,
            ids=self.prompt,
            batch=batch,
            shared=shared,
        )
        # an encoder-decoder's encoder: once, before the decoder's first step (part of TTFT)
        out = Steps(
            encoder=self.encoder.run(binding, self.dtypes) if self.encoder is not None else None
        )
        step = 0
        while step < len(plan):
            given = plan[step]
            if given is None and gen.settled is not None and batch == 1:
                count = _decode_run(plan, step)
                self.run_settled(gen, gen.settled, count, out, step=step, progress=progress)
                step += count
                continue
            self.step(gen, given, out, first=step == 0)
            step += 1
            progress(step)
        return out

    def run_settled(
        self,
        gen: Generation,
        logits: np.ndarray,
        count: int,
        out: Steps,
        *,
        step: int,
        progress: Callable[[int], None],
    ) -> None:
        """``count`` decode steps of one sequence on a settled binding (the hot path)."""
        steady = gen.steady
        gen.length = steady.run_settled(
            logits,
            count,
            out,
            at=(step, gen.length, gen.ids),
            fail=lambda err, at: self._failed(err, steady.feeds(at)),
            progress=progress,
            after=self._swap_states if self.decoder.states else None,
        )
        gen.ids = steady.ids[0, 0]

    def step(self, gen: Generation, given: np.ndarray | None, out: Steps, *, first: bool) -> None:
        """One bound step: a prompt or a chunk (``given``, bound as its own feeds) or a decode
        step (the ids the step before made, written into the arrays bound for them); its
        outputs bound again unless the generation has settled; timed and recorded in ``out``."""
        clock = time.perf_counter_ns
        start = clock()
        binding, shared = gen.binding, gen.shared
        feeds: dict[str, np.ndarray] = {}
        if given is not None:  # a prompt or a chunk: its own feeds
            new, feeds = given.shape[1], self._bind_given(binding, given, gen.length)
            gen.steady.bound = False
            gen.settled = None
        else:  # a decode step: the same arrays, rewritten in place
            new = 1
            gen.steady.feed(gen.ids, gen.length)
        if gen.settled is None:  # outputs as the step before bound them, on a shared cache
            gen.logits, gen.bound = self._bind_outputs(
                binding, new, gen.past, gen.bound, shared=shared
            )
            if given is None and shared and gen.logits is not None:
                gen.settled = gen.logits[0]
        crossing = first and bool(self.cross)
        if crossing:
            self._start_cross(binding, gen.batch)
        t0 = clock()
        try:
            gen.calls.run()
        except Exception as err:
            raise self._failed(
                err, feeds if given is not None else gen.steady.feeds(gen.length)
            ) from err
        t1 = clock()
        gen.length += new
        self._swap_states()
        fetched = gen.logits is None or not shared  # else every output is written in place
        got = binding.get_outputs() if fetched else []
        scores = gen.logits[0] if gen.logits is not None else got[0].numpy()
        gen.ids = _next_ids(scores, gen.batch, new)
        if not shared:  # the present outputs become the next step's past
            gen.past, gen.held = self._next_past(gen.past, got)
        if crossing:
            self._keep_cross(binding, got)
        out.record(clock() - start, t1 - t0, _first_token(gen.ids), gen.held)


def _cache_bytes(past: dict[str, OrtValue], dtypes: dict[str, np.dtype[np.generic]]) -> int:
    """The cache's bytes: each OrtValue's shape by its input's element size (no copy)."""
    return sum(math.prod(v.shape()) * dtypes[name].itemsize for name, v in past.items())


def _next_ids(scores: np.ndarray, batch: int, new: int) -> Ids:
    """The next ids from a step's logits ([batch, new, vocabulary]): a scalar for one
    sequence (written into the bound [1, 1] ids; a decode step's logits need no view for
    it), else [batch, 1]."""
    if batch > 1:
        ids: np.ndarray = scores[:, -1].argmax(-1)[:, None]
        return ids
    return scores.argmax() if new == 1 else scores[0, -1].argmax()


def _first_token(ids: Ids) -> int:
    """The first sequence's id among a step's next ids (what a step records)."""
    return int(ids) if isinstance(ids, np.integer) else int(ids.reshape(-1)[0])


def _decode_run(plan: list[np.ndarray | None], step: int) -> int:
    """How many decode steps (None) stand in a row from ``step`` in ``plan``."""
    end = step
    while end < len(plan) and plan[end] is None:
        end += 1
    return end - step
