"""The worker task behind ``ortlab.llm_bench``: llama-bench's tests on one session — ``pp<N>``
(one prompt of N tokens processed in one step) and ``tg<N>`` (N tokens generated one at a
time), each after the cache was filled with ``depth`` tokens (untimed), repeated, then profiled
in a second session for each test's split by node."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.decoder import DecoderInfo
from ortlab.core.machine import cpu_sample, other_cores
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.greedyloop import GreedyLoop
from ortlab.engine.profiled import profiled_session
from ortlab.engine.replies import BenchCell, LLMBenchReply
from ortlab.engine.sessioncache import open_session
from ortlab.engine.tasks_generate import PROFILE_EVENTS
from ortlab.engine.trace import ProfileData

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["Cell", "bench"]

SEED = 0


@dataclass(frozen=True)
class Cell:
    """One test, as llama-bench runs it: ``pp`` (a prompt of n_prompt tokens), ``tg`` (n_gen
    steps of one token) or both (``pp+tg``: the prompt, then the tokens), after ``n_depth``
    tokens cached, for ``n_seq`` sequences. A prompt (and the depth's fill) is fed in steps of
    at most ``min(n_batch, n_ubatch)`` tokens, llama-bench's logical and physical batch."""

    n_prompt: int
    n_gen: int
    n_depth: int
    n_seq: int = 1
    n_batch: int = 2048
    n_ubatch: int = 512

    @property
    def test(self) -> str:
        pp, tg = f"pp{self.n_prompt}", f"tg{self.n_gen}"
        if self.n_prompt and self.n_gen:
            return f"{pp}+{tg}"
        return pp if self.n_prompt else tg

    @property
    def chunk(self) -> int:
        """Tokens per prompt step."""
        return max(1, min(self.n_batch, self.n_ubatch))

    def tokens(self) -> int:
        """Tokens the cache holds at the end (the shared buffer's least length)."""
        return self.n_depth + self.n_prompt + self.n_gen

    def plan(self, rng: np.random.Generator, vocab: int) -> tuple[list[np.ndarray | None], int]:
        """The steps (ids to feed, or None: the argmax of the step before) and the index of
        the first timed one: the cache filled with n_depth random ids first, then the test."""

        def ids(n: int) -> list[np.ndarray | None]:
            whole = rng.integers(0, vocab, size=(self.n_seq, n), dtype=np.int64)
            return [
                np.ascontiguousarray(whole[:, k : k + self.chunk]) for k in range(0, n, self.chunk)
            ]

        plan: list[np.ndarray | None] = ids(self.n_depth) if self.n_depth else []
        first = len(plan)
        if self.n_prompt:
            plan += ids(self.n_prompt)
            plan += [None] * self.n_gen  # pp+tg: the tokens follow the prompt's argmax
        else:  # after a filled cache the test continues it; from nothing, a random first token
            plan += (ids(1) if not self.n_depth else [None]) + [None] * (self.n_gen - 1)
        return plan, first


def bench(
    progress: Progress,
    job: ModelJob,
    *,
    decoder: DecoderInfo,
    cells: list[Cell],
    repetitions: int,
    profile_reps: int,
    warmup: bool = True,
    delay: float = 0.0,
    shared: int = 0,
    nodes: int = 1,
) -> LLMBenchReply:
    """Each cell, after ``delay`` seconds idle and (``warmup``) one untimed warm-up, ``repetitions``
    times: the test's steps timed whole
    (as :class:`GreedyLoop` times a generator's step) and their ``sess.run`` within; then, in a
    session with ORT's profiler on, ``profile_reps`` more of each after a warm-up, with the
    trace runs of each repetition's timed steps (a tg test's first steps only when the whole
    would pass :data:`PROFILE_EVENTS`). ``shared``: the cache is one buffer per pair that long
    (genai's buffer sharing; at least every cell's tokens)."""
    sess, report, _ = open_session(job.model_path, job.model_name, job.config)
    since = cpu_sample()
    samples: list[tuple[list[int], list[int]]] = []
    total = len(cells) * (repetitions + (profile_reps if profile_reps else 0))
    done = 0
    for cell in cells:
        rng = np.random.default_rng(SEED)
        timed: tuple[list[int], list[int]] = ([], [])
        if delay:
            time.sleep(delay)
        for rep in range(repetitions + warmup):  # with a warm-up, the first is it
            step, model = _once(sess, cell, decoder=decoder, job=job, rng=rng, shared=shared)
            if rep or not warmup:
                timed[0].append(step)
                timed[1].append(model)
        samples.append(timed)
        done += repetitions
        progress(done, total)
    load = other_cores(since, cpu_sample())
    profile: ProfileData | None = None
    runs: list[list[list[int]]] = [[] for _ in cells]
    if profile_reps:
        profile, runs = _profiled(
            job, cells, decoder=decoder, reps=profile_reps, shared=shared, nodes=nodes
        )
        progress(total, total)
    return LLMBenchReply(
        cells=[
            BenchCell(
                n_prompt=c.n_prompt,
                n_gen=c.n_gen,
                n_depth=c.n_depth,
                n_seq=c.n_seq,
                n_batch=c.n_batch,
                n_ubatch=c.n_ubatch,
                samples_ns=s[0],
                model_ns=s[1],
                profiled_runs=r,
            )
            for c, s, r in zip(cells, samples, runs, strict=True)
        ],
        report=report,
        other_cores=None if np.isnan(load) else round(float(load), 2),
        profile=profile,
    )


def _once(
    sess: ort.InferenceSession,
    cell: Cell,
    *,
    decoder: DecoderInfo,
    job: ModelJob,
    rng: np.random.Generator,
    shared: int,
) -> tuple[int, int]:
    """One repetition of ``cell``: its timed steps' whole time and their sess.run, ns."""
    plan, first = cell.plan(rng, int(decoder.vocab or 2))
    prompt = next(p for p in plan if p is not None)
    loop = GreedyLoop(sess, decoder, job, prompt=prompt)
    g = loop.run_steps(plan, lambda _k: None, shared=shared)
    return sum(g.step_ns[first:]), sum(g.run_ns[first:])


def _profiled(
    job: ModelJob,
    cells: list[Cell],
    *,
    decoder: DecoderInfo,
    reps: int,
    shared: int,
    nodes: int,
) -> tuple[ProfileData, list[list[list[int]]]]:
    """Every cell's profiled repetitions in one profiled session: the trace and, per cell and
    repetition, the trace runs of its timed steps."""
    vocab = int(decoder.vocab or 2)
    plans = [c.plan(np.random.default_rng(SEED), vocab) for c in cells]
    fills = sum(first for _, first in plans) * (reps + 1)  # the depth chunks, all profiled
    room = PROFILE_EVENTS // max(nodes, 1) - fills  # runs the trace may still hold
    keep = max(1, room // max(len(cells) * (reps + 1), 1))  # timed steps per repetition
    at = 0  # the trace's runs so far
    runs: list[list[list[int]]] = []
    with profiled_session(job, "llm-bench-") as (sess, trace):
        for cell in cells:
            rng = np.random.default_rng(SEED)
            mine = []
            for rep in range(reps + 1):  # the first is the warm-up
                plan, first = cell.plan(rng, vocab)
                prompt = next(p for p in plan if p is not None)
                loop = GreedyLoop(sess, decoder, job, prompt=prompt)
                budget = first + min(len(plan) - first, keep)
                loop.run_steps(plan[:budget], lambda _k: None, shared=shared)
                if rep:
                    mine.append(list(range(at + first, at + budget)))
                at += budget
            runs.append(mine)
    return trace[0], runs
