"""A bound run and its per-step rebinding, called the cheapest way onnxruntime's Python binding
allows.

``InferenceSession.run_with_iobinding(binding)`` checks WebGPU graph capture (a call into the
binding and a look at the run options) before it calls the session, and with no run options the
binding builds a default ``RunOptions`` for every call; ``IOBinding.bind_cpu_input`` turns a
numpy array into a tensor each time. On a decoder whose step takes tens of µs these cost
10-15 µs a step once a run has left the caches cold (measured interleaved on the bundled genai
int4 decoder, a decode step's run: the public call 87.5 µs, the binding's own call with one
``RunOptions`` kept 73.6 µs, onnxruntime-genai's whole C++ step 82.9 µs; rebinding the mask
from a numpy view 3.3 µs, an OrtValue made before the steps 0.9 µs). A generator written in C++
pays none of it, so a greedy loop to be read beside one must not either.

Once a step has left the binding settled (one sequence, a shared cache, the logits' array
bound), the decode steps after it run in :meth:`DecodeInputs.run_settled`: a loop that does
between runs only what a step must (the mask rebound, the position written, the argmax
written into the bound ids). Every Python operation between two runs also costs the next run
its caches: on the bundled int4 decoder (a ~40 µs step, 2 Intel Xeon vCPUs), the general
step's ~4.5 µs of Python around a run made ortlab's whole step 0.99-1.01x genai's, this
loop's ~2 µs 0.96x (interleaved in one process each, the commit before and after).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.decoder import DecoderInfo
from ortlab.engine.encoder_step import EncoderTimes

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["BoundCalls", "CarriedStates", "DecodeInputs", "Steps", "masks"]


class BoundCalls:
    """``run()`` runs the session on the binding; ``bind(name, held(value))`` binds an OrtValue
    as an input (``held`` once, before the timed steps). Both go to the Python binding's own
    entries (what the public methods call after their checks) with one ``RunOptions`` made
    here; to the public methods where those entries are missing (another onnxruntime) or
    WebGPU graph capture is on (its checks then matter)."""

    def __init__(self, sess: ort.InferenceSession, binding: ort.IOBinding) -> None:
        import onnxruntime as ort

        options = ort.RunOptions()
        inner = getattr(sess, "_sess", None)
        raw = getattr(binding, "_iobinding", None)
        capture = getattr(inner, "is_webgpu_graph_capture_enabled", None)
        self.direct = raw is not None and callable(capture) and not capture()
        self.run: Callable[[], None]
        self.bind: Callable[[str, object], None]
        if self.direct:  # partials of the binding's C entries: no Python frame per call
            self.run = functools.partial(inner.run_with_iobinding, raw, options)  # type: ignore[union-attr]
            self.bind = raw.bind_ortvalue_input  # type: ignore[union-attr]
        else:
            self.run = functools.partial(sess.run_with_iobinding, binding, options)
            self.bind = binding.bind_ortvalue_input

    def held(self, value: ort.OrtValue) -> object:
        """What :attr:`bind` takes for ``value`` (keep ``value`` alive while it is bound)."""
        return value._ortvalue if self.direct else value


def masks(batch: int, longest: int, dtype: np.dtype[np.generic]) -> list[ort.OrtValue]:
    """A decode step's masks: item n a [batch, n] mask of ones (0 < n <= ``longest``; item 0
    unused), views of one buffer (the mask has no padding, so any run of it is the mask),
    made before the steps for a loop's generations."""
    import onnxruntime as ort

    ones = np.ones(batch * longest, dtype=dtype)
    return [
        ort.OrtValue.ortvalue_from_numpy(ones[: batch * n].reshape(batch, n))
        for n in range(longest + 1)
    ]


class CarriedStates:
    """A hybrid decoder's carried states (``DecoderInfo.states``: LFM2's convolution states),
    two buffers each, zero at the start: a step reads one and writes the other, then
    :meth:`swap` exchanges them (no copy, and no buffer read while the op writes it). Bound
    when made: make it after the step's logits and presents are bound, so those keep their
    places among the binding's outputs."""

    def __init__(
        self,
        decoder: DecoderInfo,
        dtypes: dict[str, np.dtype[np.generic]],
        batch: int,
        binding: ort.IOBinding,
    ) -> None:
        import onnxruntime as ort

        self.binding = binding
        self.buffers: list[list[object]] = []
        for st in decoder.states:
            shape = decoder.past_shape(st.past, batch, 0)
            zero = [np.zeros(shape, dtype=dtypes[st.past]) for _ in range(2)]
            self.buffers.append([st.past, st.present, *map(ort.OrtValue.ortvalue_from_numpy, zero)])
        self._bind()

    def _bind(self) -> None:
        for past, present, read, write in self.buffers:
            self.binding.bind_ortvalue_input(past, read)
            self.binding.bind_ortvalue_output(present, write)

    def swap(self) -> None:
        """After a run: what it wrote is the next step's past."""
        for b in self.buffers:
            b[2], b[3] = b[3], b[2]
        self._bind()


Ids = np.ndarray | np.integer
"""A step's next ids: one sequence's id (a scalar), else [batch, 1]."""


@dataclass
class Steps:
    """One generation's steps: each whole (ns), the model's run within it (ns), the token it
    made and the cache's bytes after it."""

    step_ns: list[int] = field(default_factory=list)
    run_ns: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    cache_bytes: list[int] = field(default_factory=list)
    encoder: EncoderTimes | None = None
    """An encoder-decoder's encoder run before the first step."""

    def record(self, step_ns: int, run_ns: int, token: int, cache_bytes: int) -> None:
        """One step: whole, its run, its token and the cache's bytes after it."""
        self.step_ns.append(step_ns)
        self.run_ns.append(run_ns)
        self.tokens.append(token)
        self.cache_bytes.append(cache_bytes)


class DecodeInputs:
    """A decode step's inputs, bound once and rewritten in place (IOBinding reads a bound
    array's memory at each run): the new token's ids and its position; the mask, whose
    length grows, rebound each step from ``masks`` (:func:`masks`)."""

    def __init__(
        self,
        decoder: DecoderInfo,
        dtypes: dict[str, np.dtype[np.generic]],
        batch: int,
        binding: ort.IOBinding,
        calls: BoundCalls,
        *,
        masks: tuple[list[ort.OrtValue], list[object]] | None,
    ) -> None:
        d = decoder
        self.decoder, self.binding, self.calls, self.bound = d, binding, calls, False
        self.ids = np.zeros((batch, 1), dtype=dtypes[d.input_ids])
        self.positions = np.zeros((batch, 1), dtype=dtypes[d.positions]) if d.positions else None
        self.fixed = {d.input_ids: self.ids}
        """The inputs bound once and rewritten in place (not the mask)."""
        if self.positions is not None and d.positions:
            self.fixed[d.positions] = self.positions
        if d.use_cache_branch:
            self.fixed[d.use_cache_branch] = np.array([True])
        self.masks, self.held = masks or ([], [])
        """The masks by length and what :attr:`BoundCalls.bind` takes for each."""

    def feed(self, ids: Ids, length: int) -> None:
        """Bind the step after ``length`` cached tokens whose new ids are ``ids`` (a
        [batch, 1] array, or one sequence's id)."""
        self.ids[...] = ids
        if self.positions is not None:
            self.positions.fill(length)
        if not self.bound:  # after a prompt or a chunk, which bound its own arrays
            for name, value in self.fixed.items():
                self.binding.bind_cpu_input(name, value)
            self.bound = True
        if self.held and self.decoder.mask:
            self.calls.bind(self.decoder.mask, self.held[length + 1])

    def feeds(self, length: int) -> dict[str, np.ndarray]:
        """The step's feeds as arrays (for an error's message)."""
        feeds = dict(self.fixed)
        if self.masks and self.decoder.mask:
            feeds[self.decoder.mask] = self.masks[length + 1].numpy()
        return feeds

    def run_settled(
        self,
        logits: np.ndarray,
        count: int,
        out: Steps,
        *,
        at: tuple[int, int, Ids],
        fail: Callable[[Exception, int], Exception],
        progress: Callable[[int], None],
        after: Callable[[], None] | None = None,
    ) -> int:
        """``count`` decode steps of one sequence on a settled binding (a shared cache and
        ``logits``, [1, 1, vocabulary], bound as the step before left them), each timed
        whole as :meth:`feed` and the run would be, with only what a step must do between
        runs: the mask rebound, the position written, the logits' argmax written straight
        into the bound ids. ``at`` is (the first step's number, the cached tokens before it,
        its token); each step is recorded in ``out`` and said to ``progress`` (the steps
        done), and ``fail(error, length)`` is raised where a run fails; ``after`` runs after
        each run (a hybrid decoder's carried states swapped). Returns the cached tokens after
        them."""
        step, length, first = at
        self.ids[...] = first
        ids = self.ids.reshape(())  # a view: the argmax is written into the bound ids
        best = logits.reshape(-1).argmax
        into = ids if ids.dtype == np.intp else None  # argmax writes intp only
        clock, run, bind, positions = (
            time.perf_counter_ns,
            self.calls.run,
            self.calls.bind,
            self.positions,
        )
        mask, held = (self.decoder.mask, self.held) if self.held else (None, [])
        cached = out.cache_bytes[-1]  # a shared buffer's bytes do not change
        for _ in range(count):
            start = clock()
            if mask:
                bind(mask, held[length + 1])
            if positions is not None:
                positions.fill(length)
            t0 = clock()
            try:
                run()
            except Exception as err:
                raise fail(err, length) from err
            t1 = clock()
            length += 1
            if after is not None:
                after()
            if into is not None:
                best(out=into)
            else:
                ids[...] = best()
            # recorded inline, not by Steps.record: a call is Python between runs
            out.step_ns.append(clock() - start)
            out.run_ns.append(t1 - t0)
            out.tokens.append(int(ids))
            out.cache_bytes.append(cached)
            step += 1
            progress(step)
        return length
