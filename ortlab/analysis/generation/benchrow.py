"""The rows of ``ortlab.llm_bench``: one llama-bench test as it ran (:class:`BenchRow`: what it
ran, each repetition's time, its split by node and its roof) and the columns that name a cell
in every table of the result."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ortlab.analysis.generation.phases import PhaseRoof
from ortlab.core.units import tokens_per_s

__all__ = ["CELL_KEYS", "DEFAULT_N_BATCH", "DEFAULT_N_UBATCH", "BenchRow", "NodeTime"]

DEFAULT_N_BATCH, DEFAULT_N_UBATCH = 2048, 512
"""llama-bench's -b and -ub defaults."""

CELL_KEYS = ["test", "n_depth", "n_threads", "n_batch", "n_ubatch", "n_seq"]
"""The columns that name a cell in every table of the result."""


@dataclass(frozen=True)
class NodeTime:
    """One node's part of a cell: its time (µs per step of a pp test, per token of a tg test:
    the median over the profiled repetitions and a tg test's steps, profiling on) and share."""

    node: str
    op_type: str
    layer: int | None
    us: float
    share: float


@dataclass(frozen=True)
class BenchRow:
    """One test of the matrix, llama-bench's row: what it ran and each repetition's time."""

    test: str
    """'pp512' (a prompt of 512 tokens), 'tg128' (128 tokens one at a time) or 'pp512+tg128'
    (the prompt, then the tokens: llama-bench's -pg)."""
    n_prompt: int
    n_gen: int
    n_depth: int
    """Tokens cached before the test (filled first, untimed)."""
    n_threads: int
    """Intra-op threads (ORT's default: the physical cores)."""
    n_batch: int
    """llama-bench's logical batch (-b): a prompt is fed in steps of at most
    min(n_batch, n_ubatch) tokens."""
    samples_ns: list[int]
    """Each repetition's time: the test's steps timed whole as a generator runs them."""
    model_ns: list[int] = field(default_factory=list)
    """Each repetition's ``sess.run`` within those steps."""
    n_ubatch: int = 512
    """llama-bench's physical batch (-ub)."""
    n_seq: int = 1
    """Sequences processed together (ortlab's; the model's batch role)."""
    split: list[NodeTime] = field(default_factory=list)
    """The cell's time by node (profiled; empty without profiling)."""
    roof: PhaseRoof | None = None
    """The cell's nodes against the ceilings: its time per step (per token of a tg test)
    against the work counted at the cell's shapes (a pp test's prompt after its depth; a tg
    test's middle step), phase 'prefill' for pp, 'decode' for tg."""

    @property
    def tokens(self) -> int:
        """Tokens the timed steps process (llama-bench's: prompt and generated, all
        sequences)."""
        return (self.n_prompt + self.n_gen) * self.n_seq

    @property
    def key(self) -> tuple[str, int, int, int, int, int]:
        """The cell, as :data:`CELL_KEYS` name it."""
        return (self.test, self.n_depth, self.n_threads, self.n_batch, self.n_ubatch, self.n_seq)

    @property
    def setting(self) -> str:
        """The cell in words: 'tg16 @ d512 · 2 threads', with the batches and sequences
        where they are not llama-bench's defaults."""
        out = [self.label, f"{self.n_threads} threads"]
        out += [f"n_batch {self.n_batch}"] if self.n_batch != DEFAULT_N_BATCH else []
        out += [f"n_ubatch {self.n_ubatch}"] if self.n_ubatch != DEFAULT_N_UBATCH else []
        out += [f"{self.n_seq} sequences"] if self.n_seq != 1 else []
        return " · ".join(out)

    @property
    def samples_ts(self) -> list[float]:
        return [tokens_per_s(self.tokens, ns / 1e6) for ns in self.samples_ns if ns > 0]

    @property
    def avg_ts(self) -> float:
        """Mean tokens/s over repetitions (llama-bench's avg_ts)."""
        return _mean(self.samples_ts)

    @property
    def stddev_ts(self) -> float:
        """Their sample standard deviation (llama-bench's stddev_ts; 0 for one sample)."""
        return _stdev(self.samples_ts)

    @property
    def avg_ns(self) -> float:
        return _mean([float(x) for x in self.samples_ns])

    @property
    def stddev_ns(self) -> float:
        return _stdev([float(x) for x in self.samples_ns])

    @property
    def model_ts(self) -> float:
        """Mean tokens/s of the model's own sess.run within the steps."""
        return _mean([tokens_per_s(self.tokens, ns / 1e6) for ns in self.model_ns if ns > 0])

    @property
    def label(self) -> str:
        """llama-bench's test column: 'pp512', 'tg128 @ d2048'."""
        return self.test + (f" @ d{self.n_depth}" if self.n_depth else "")


def _mean(xs: Sequence[float]) -> float:
    return float(statistics.fmean(xs)) if xs else math.nan


def _stdev(xs: Sequence[float]) -> float:
    return float(statistics.stdev(xs)) if len(xs) > 1 else 0.0
