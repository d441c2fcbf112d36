"""An encoder-decoder's encoder as a generation runs it: once, before the decoder's first step,
its output bound as the decoder's ``encoder_hidden_states`` for every step after (and the
encoder's attention mask as the decoder's, where it takes one)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.decoder import DecoderInfo

if TYPE_CHECKING:
    from onnxruntime import InferenceSession, IOBinding

__all__ = ["EncoderStep", "EncoderTimes"]


@dataclass(frozen=True)
class EncoderTimes:
    """One encoder run: whole (its feeds, the run, binding its states for the decoder) and the
    run alone (ns)."""

    step_ns: int
    run_ns: int


class EncoderStep:
    """The encoder's session and its feeds (the inputs ``generate`` was given, by the encoder's
    own names), bound to a decoder's IOBinding by :meth:`run`."""

    def __init__(
        self, sess: InferenceSession, feeds: dict[str, np.ndarray], decoder: DecoderInfo
    ) -> None:
        self.sess, self.decoder = sess, decoder
        self.feeds = feeds
        self.output = sess.get_outputs()[0].name
        self.bound: tuple[np.ndarray, ...] = ()
        self.mask = next(
            (np.asarray(v) for k, v in feeds.items() if "mask" in k.lower() and np.ndim(v) == 2),
            None,
        )

    def run(self, binding: IOBinding, dtypes: dict[str, np.dtype[np.generic]]) -> EncoderTimes:
        """Run the encoder on its feeds and bind its states (and mask), or the cross-attention
        K/V it computes (:attr:`DecoderInfo.encoder_feeds`), as the decoder's inputs, timed
        whole and the run alone."""
        clock = time.perf_counter_ns
        d = self.decoder
        wanted = [self.output, *(made for made, _ in d.encoder_feeds)]
        t0 = clock()
        got = self.sess.run(wanted, self.feeds)
        t1 = clock()
        states = got[0]
        held: list[np.ndarray] = list(got)  # the binding reads their memory at each run
        if d.encoder_states:
            binding.bind_cpu_input(d.encoder_states, states)
        for (_, read), value in zip(d.encoder_feeds, got[1:], strict=True):
            binding.bind_cpu_input(read, value)  # the cross-attention K/V, every step
        if d.encoder_mask:
            mask = self.mask
            if mask is None:  # the encoder takes none: every frame attended
                mask = np.ones(states.shape[:2], dtype=np.int64)
            mask = mask.astype(dtypes[d.encoder_mask], copy=False)
            binding.bind_cpu_input(d.encoder_mask, mask)
            held.append(mask)
        self.bound = tuple(held)
        return EncoderTimes(step_ns=clock() - t0, run_ns=t1 - t0)
