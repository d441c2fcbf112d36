"""``ortlab.llm_bench``: the benchmark matrix LLM users read, as llama.cpp's ``llama-bench``
prints it — ``pp<N>`` (a prompt of N tokens processed) and ``tg<N>`` (N tokens generated one
at a time), each after ``depth`` tokens already cached, over threads and batch, repeated —
with llama-bench's own field names, so the scripts and dashboards that read its JSON read
ortlab's. Beyond it: each cell's time split by node, layer and op (profiled repetitions), the
model's own ``sess.run`` beside the whole step."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ortlab.analysis.generation.benchrow import (
    CELL_KEYS,
    DEFAULT_N_BATCH,
    DEFAULT_N_UBATCH,
    BenchRow,
    NodeTime,
)
from ortlab.analysis.generation.generate import require_decoder
from ortlab.analysis.generation.phases import (
    COMPILED_NOTE,
    ceiling_lookup,
    machine_peaks,
    step_roof,
    weights_summary,
)
from ortlab.analysis.limits.ceilings import Peak
from ortlab.core.config import SessionConfig
from ortlab.core.errors import FeedError, OptionError
from ortlab.core.machine import (
    CacheLevel,
    cache_levels,
    cpu_model,
    load_sentence,
    physical_cores,
)
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.result import Result, Table, table
from ortlab.core.run import Run
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.core.version import __version__
from ortlab.engine import tasks_bench
from ortlab.engine.calls import as_config, edge, run_model_task
from ortlab.engine.replies import BenchCell, LLMBenchReply
from ortlab.engine.trace import ProfileData, per_run_grid

if TYPE_CHECKING:
    import pandas as pd

    from ortlab.core.config import ConfigLike

__all__ = [
    "CELL_KEYS",
    "DEFAULT_N_BATCH",
    "DEFAULT_N_UBATCH",
    "BenchRow",
    "LLMBenchResult",
    "NodeTime",
    "llm_bench",
]

PROFILE_REPS = 3
"""Profiled repetitions per cell: each node's time is its median over them."""


@dataclass(frozen=True)
class LLMBenchResult(Result):
    """``llm_bench``: one row per test, depth, threads and batch (:attr:`rows`), printable as
    llama-bench prints it (:meth:`to_llama_bench`: md, csv, json, jsonl); each cell's time by
    layer and op (:meth:`split`, :meth:`by_layer`).

    ``plot()``: tg tokens/s against depth and pp tokens/s against prompt length."""

    model: str
    config: SessionConfig
    decoder: str
    rows: list[BenchRow]
    repetitions: int
    params: int
    """The model's parameters (initializer elements)."""
    size_bytes: int
    """Its files on disk (external data included)."""
    cpu: str = ""
    profile_reps: int = 0
    synthetic: bool = True
    other_cores: list[float | None] = field(default_factory=list)
    """Per thread setting, the cores other processes used while its cells were timed."""
    notes: list[str] = field(default_factory=list)
    ortlab_version: str = __version__
    ort_version: str = ""
    peaks: dict[int, list[Peak]] = field(default_factory=dict)
    """Per thread count, the ceilings its cells are set against (measured with ORT)."""
    levels: tuple[CacheLevel, ...] = ()
    """The machine's cache levels (a call whose bytes fit one meets its bandwidth)."""

    @table
    def weights(self) -> Table:
        """Each cell's weight multiplications against the ceilings it meets: test, n_depth,
        n_threads, n_batch, n_ubatch, n_seq, then per op type and precision what
        :meth:`GenerationResult.weights` gives (nodes, us_per_step, flops, bytes,
        achieved_flops, dtype, peak_flops, achieved_bytes, dram_bandwidth, bandwidth, ceiling,
        fraction: of the GEMM peak in a pp test, of the bandwidth in a tg test,
        dram_fraction); empty without profiling."""
        import pandas as pd

        frames = []
        for r in self.rows:
            if r.roof is None:
                continue
            cfg = dataclasses.replace(self.config, intra_op_threads=r.n_threads)
            lookup = ceiling_lookup(cfg, self.peaks.get(r.n_threads, []), self.levels)
            w = weights_summary([r.roof], lookup).drop(columns="phase")
            keys = dict(zip(CELL_KEYS, r.key, strict=True)) | {"test": r.label}
            frames.append(w.assign(**keys))
        cols = CELL_KEYS
        if not frames:
            return pd.DataFrame(columns=cols)
        out = pd.concat(frames, ignore_index=True)
        return out[[*cols, *(c for c in out.columns if c not in cols)]]

    @table
    def table(self) -> Table:
        """One row per cell: test, n_prompt, n_gen, n_depth, n_threads, n_batch, n_ubatch,
        n_seq, avg_ts,
        stddev_ts, model_ts (sess.run alone), avg_ns, stddev_ns, repetitions."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "test": r.label,
                    "n_prompt": r.n_prompt,
                    "n_gen": r.n_gen,
                    "n_depth": r.n_depth,
                    "n_threads": r.n_threads,
                    "n_batch": r.n_batch,
                    "n_ubatch": r.n_ubatch,
                    "n_seq": r.n_seq,
                    "avg_ts": r.avg_ts,
                    "stddev_ts": r.stddev_ts,
                    "model_ts": r.model_ts,
                    "avg_ns": r.avg_ns,
                    "stddev_ns": r.stddev_ns,
                    "repetitions": len(r.samples_ns),
                }
                for r in self.rows
            ]
        )

    def to_pandas(self) -> Table:
        """The :attr:`table`."""
        return self.table

    def records(self) -> list[dict[str, object]]:
        """One dict per row with llama-bench's JSON field names (its ``-o json``), and
        ortlab's extras prefixed ``ortlab_``."""
        return [
            {
                "build_commit": f"ortlab {self.ortlab_version}",
                "cpu_info": self.cpu,
                "backends": ",".join(
                    p.removesuffix("ExecutionProvider") for p in (self.config.providers or ("CPU",))
                ),
                "model_filename": self.model,
                "model_type": self.decoder,
                "model_size": self.size_bytes,
                "model_n_params": self.params,
                "n_batch": r.n_batch,
                "n_ubatch": r.n_ubatch,
                "n_threads": r.n_threads,
                "n_prompt": r.n_prompt,
                "n_gen": r.n_gen,
                "n_depth": r.n_depth,
                "avg_ns": round(r.avg_ns),
                "stddev_ns": round(r.stddev_ns),
                "avg_ts": r.avg_ts,
                "stddev_ts": r.stddev_ts,
                "samples_ns": list(r.samples_ns),
                "samples_ts": r.samples_ts,
                "ortlab_model_avg_ts": r.model_ts,
                "ortlab_sequences": r.n_seq,
                "ortlab_onnxruntime": self.ort_version,
                "ortlab_synthetic": self.synthetic,
            }
            for r in self.rows
        ]

    def to_llama_bench(self, fmt: str = "md") -> str:
        """The matrix as llama-bench writes it (its ``-o``), through the views' registered
        renderer of ``fmt``: ``md`` (its table: model, size, params, backend, threads,
        n_batch, test, t/s as mean ± standard deviation), ``csv``, ``json`` (a list of
        records, :meth:`records`), ``jsonl`` (one record a line) or ``sql`` (a ``CREATE
        TABLE test`` and one ``INSERT`` per record, for sqlite3)."""
        from ortlab.core.display import LLAMA_BENCH_FORMATS, render

        if fmt not in LLAMA_BENCH_FORMATS:
            raise ValueError(
                f"to_llama_bench: fmt is one of {', '.join(LLAMA_BENCH_FORMATS)} (got {fmt!r})"
            )
        return str(render(self, fmt))

    def split(self) -> Table:
        """Each cell's profiled time by node: the cell (:data:`CELL_KEYS`), node,
        op_type, layer (from the graph's structure; None outside the layers), us (per step
        of a pp test, per token of a tg test), share; slowest first within a cell."""
        import pandas as pd

        cols = [*CELL_KEYS, "node", "op_type", "layer", "us"]
        rows = [
            {
                **dict(zip(CELL_KEYS, r.key, strict=True)),
                "node": n.node,
                "op_type": n.op_type,
                "layer": n.layer,
                "us": n.us,
                "share": n.share,
            }
            for r in self.rows
            for n in sorted(r.split, key=lambda x: -x.us)
        ]
        frame = pd.DataFrame(rows, columns=[*cols, "share"])
        return frame.astype({"layer": "Int64"})

    def by_layer(self) -> Table:
        """:meth:`split` summed per cell and layer (-1: outside the layers): test, n_depth,
        n_threads, n_batch, n_ubatch, n_seq, layer, us, share."""
        t = self.split()
        keys = [*CELL_KEYS, "layer"]
        if not len(t):
            return t.reindex(columns=[*keys, "us", "share"])
        t = t.assign(layer=t["layer"].fillna(-1).astype(int))
        out = t.groupby(keys, sort=False, as_index=False)[["us", "share"]].sum()
        order = {r.key: k for k, r in enumerate(self.rows)}
        cell = [order[c] for c in out[CELL_KEYS].itertuples(index=False, name=None)]
        out = out.assign(_cell=cell).sort_values(["_cell", "layer"], ignore_index=True)
        return out.drop(columns="_cell")

    def by_op(self) -> Table:
        """:meth:`split` summed per cell and op type: the cell (:data:`CELL_KEYS`), op_type,
        us, share; slowest first within a cell."""
        t = self.split()
        keys = [*CELL_KEYS, "op_type"]
        if not len(t):
            return t.reindex(columns=[*keys, "us", "share"])
        out = t.groupby(keys, sort=False, as_index=False)[["us", "share"]].sum()
        n = len(CELL_KEYS)
        return out.sort_values([*CELL_KEYS, "us"], ascending=[True] * n + [False])

    def __repr__(self) -> str:
        return f"<LLMBenchResult {self.model!r}: {len(self.rows)} cells>"


def llm_bench(
    model: ModelLike,
    config: ConfigLike | None = None,
    *,
    prompt: Sequence[int] = (512,),
    new_tokens: Sequence[int] = (128,),
    depth: Sequence[int] = (0,),
    threads: Sequence[int] | None = None,
    n_batch: Sequence[int] = (DEFAULT_N_BATCH,),
    n_ubatch: Sequence[int] = (DEFAULT_N_UBATCH,),
    pg: Sequence[tuple[int, int]] = (),
    sequences: Sequence[int] = (1,),
    repetitions: int = 5,
    warmup: bool = True,
    delay: float = 0.0,
    profile: bool = True,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> LLMBenchResult:
    """llama-bench's matrix on an ONNX decoder: for every depth, thread count, batch and
    sequence count, a ``pp<p>`` test per prompt length, a ``tg<n>`` test per new-token count
    (n steps of one token, greedy) and a ``pp<p>+tg<n>`` test per ``pg`` pair (the prompt,
    then the tokens; its t/s counts both), each after ``depth`` tokens were cached (untimed),
    timed ``repetitions`` times after a warm-up, whole steps as a generator runs them
    (llama-bench's t/s), the model's ``sess.run`` beside; with ``profile``, three more
    profiled repetitions of each cell split its time by node, layer and op. A prompt (and the
    depth's fill) is fed in steps of at most ``min(n_batch, n_ubatch)`` tokens, as llama-bench
    splits it by its logical (-b, 2048) and physical (-ub, 512) batch. ``sequences``: how many
    sequences each step carries (the model's batch role). ``warmup``: one untimed repetition
    first (llama-bench's; ``--no-warmup`` times from the first); ``delay``: seconds idle before
    each test (llama-bench's ``--delay``, to cool down). Random ids in the vocabulary
    (synthetic, seeded). ``threads``: intra-op thread counts (None: the config's). A prompt
    or new-token count of 0 means no such test, as ``-p 0`` / ``-n 0`` do in llama-bench."""
    m = load(model)
    info = require_decoder(m, "ortlab.llm_bench", "ortlab.benchmark times any model.")
    base = as_config(config)
    sizes = {
        "prompt": (prompt, 0),
        "new_tokens": (new_tokens, 0),
        "depth": (depth, 0),
        "n_batch": (n_batch, 1),
        "n_ubatch": (n_ubatch, 1),
        "sequences": (sequences, 1),
    }
    for name, (values, least) in sizes.items():
        if not values or any(int(v) < least for v in values):
            raise OptionError(
                f"llm_bench: {name} must be a non-empty list of counts >= {least} (as "
                f"llama-bench's, where a prompt or new tokens of 0 means no such test); got "
                f"{list(values)}"
            )
    pairs = [(int(p), int(n)) for p, n in pg]
    if any(p < 1 or n < 1 for p, n in pairs):
        raise OptionError(
            f"llm_bench: pg takes (prompt, new tokens) pairs of counts >= 1, as llama-bench's "
            f"-pg 512,128; got {list(pg)}"
        )
    if delay < 0 or not math.isfinite(delay):
        raise OptionError(f"llm_bench: delay is seconds >= 0 (got {delay})")
    if repetitions < 1:
        raise OptionError(f"llm_bench: repetitions must be >= 1 (got {repetitions})")
    prompts = [int(p) for p in prompt if int(p) > 0]  # -p 0: no pp test, as llama-bench
    gens = [int(n) for n in new_tokens if int(n) > 0]  # -n 0: no tg test
    if not prompts and not gens and not pairs:
        raise OptionError(
            "llm_bench: prompt and new_tokens are both 0 and no pg pair is given: nothing to "
            "test; give a prompt length (-p 512), tokens to generate (-n 128) or both "
            "(-pg 512,128)."
        )
    tests = [(p, 0) for p in prompts] + [(0, n) for n in gens] + pairs
    cells = [
        tasks_bench.Cell(p, n, int(d), int(s), int(b), int(u))
        for d in depth
        for b in n_batch
        for u in n_ubatch
        for s in sequences
        for p, n in tests
    ]
    longest = max(c.tokens() for c in cells)
    if info.max_length is not None and longest > info.max_length:
        raise FeedError(
            f"A cell of {longest} tokens (depth + prompt + new tokens) is beyond the "
            f"{info.max_length} tokens {m.name!r} is made for ({info.source}): ask less."
        )
    shared = info.shared_buffer()
    settings = list(threads) if threads else [base.intra_op_threads]
    reps = PROFILE_REPS if profile else 0
    rows: list[BenchRow] = []
    loads: list[float | None] = []
    version = ""
    first = edge(
        m, base, None, dims={"prompt": 1, "past": 0, "batch": 1}, progress=progress, timeout=timeout
    )
    for t in settings:
        run = first.derive(config=dataclasses.replace(base, intra_op_threads=int(t)))
        reply: LLMBenchReply = run_model_task(
            tasks_bench.bench,
            run,
            decoder=info,
            cells=cells,
            repetitions=repetitions,
            warmup=warmup,
            delay=delay,
            profile_reps=reps,
            shared=shared,
            nodes=m.summary.node_count_total,
        )
        version = reply.report.ort_version
        loads.append(reply.other_cores)
        n_threads = int(t) or physical_cores()
        rows += [_row(c, n_threads, m, reply.profile) for c in reply.cells]
    notes = [
        "Each test's time is its steps timed whole as a generator runs them (feeds, sess.run, "
        "the argmax, the next cache), after "
        + ("one untimed warm-up" if warmup else "no warm-up (--no-warmup)")
        + " and the depth's tokens cached "
        f"untimed; t/s is the mean over {repetitions} repetitions ± their standard deviation, "
        "as llama-bench prints it; ortlab_model_avg_ts is the model's own sess.run.",
        "Prompts and depths are random ids in the vocabulary (synthetic, seeded); tg tests "
        "generate greedily.",
        *(
            load_sentence(x) + f" (threads {s or physical_cores()})"
            for x, s in zip(loads, settings, strict=True)
        ),
    ]
    cpus = os.cpu_count() or 1
    over = sorted({int(t) for t in settings if int(t) > cpus})
    if over:
        notes.append(
            f"Threads {', '.join(map(str, over))}: more than this machine's {cpus} logical "
            "cores, so their threads take turns on them: those rows measure that contention."
        )
    peaks: dict[int, list[Peak]] = {}
    if profile:
        notes.append(
            f"split(), by_layer(), by_op(): {reps} more profiled repetitions of each cell, each "
            "node's time its median over them (and over a tg test's steps); "
            f"{PROFILER_OVERHEAD}."
        )
        rows, peaks, more = _with_roofs(first, rows, settings)
        notes += more
    return LLMBenchResult(
        model=m.name,
        config=base,
        decoder=info.line(),
        rows=rows,
        repetitions=repetitions,
        params=_params(m),
        size_bytes=m.disk_bytes,
        cpu=cpu_model(),
        profile_reps=reps,
        other_cores=loads,
        notes=notes,
        ort_version=version,
        peaks=peaks,
        levels=cache_levels(),
    )


def _with_roofs(
    run: Run, rows: list[BenchRow], settings: list[int]
) -> tuple[list[BenchRow], dict[int, list[Peak]], list[str]]:
    """Each profiled cell against the ceilings measured at its thread count: its nodes' time
    against the work counted at its shapes (one run per distinct shape, in the worker)."""
    base, timeout = run.config, run.timeout
    peaks: dict[int, list[Peak]] = {}
    out = []
    for t in settings:
        cfg = dataclasses.replace(base, intra_op_threads=int(t))
        got = machine_peaks(cfg, timeout)
        if got is None:
            return rows, {}, [COMPILED_NOTE]
        peaks[int(t) or physical_cores()] = got
    lookup = {
        n: ceiling_lookup(dataclasses.replace(base, intra_op_threads=n), p, cache_levels())
        for n, p in peaks.items()
    }
    for r in rows:
        if not r.split or (r.n_prompt and r.n_gen):  # a pp+tg test has no one phase
            out.append(r)
            continue
        times = _times(r.split)
        pp = bool(r.n_prompt)
        step = min(r.n_prompt, r.n_batch, r.n_ubatch)  # a pp test's prompt step
        dims = {  # a pp test's middle step: its chunk after half the others
            "prompt": step if pp else 1,
            "past": r.n_depth + ((r.n_prompt - step) // 2 if pp else max(r.n_gen - 1, 0) // 2),
            "batch": r.n_seq,
        }
        cfg = dataclasses.replace(base, intra_op_threads=r.n_threads)
        roof = step_roof(
            run.derive(config=cfg),
            times,
            phase="prefill" if pp else "decode",
            dims=dims,
            lookup=lookup[r.n_threads],
        )
        out.append(dataclasses.replace(r, roof=roof))
    return (
        out,
        peaks,
        [
            "weights(): each cell's weight multiplications (profiled time per step, per token of a "
            "tg test) against the work counted at the cell's shapes (a tg test's middle step) and "
            "the ceilings measured with ORT at its thread count: a pp test against the GEMM peak, "
            "a tg test against the bandwidth its weights meet (the nearest cache level they "
            "fit, or DRAM)."
        ],
    )


def _times(split: list[NodeTime]) -> pd.DataFrame:
    """A cell's node times as the roofline reads them: node, us_per_step, share."""
    import pandas as pd

    return pd.DataFrame(
        {
            "node": [n.node for n in split],
            "us_per_step": [n.us for n in split],
            "share": [n.share for n in split],
        }
    )


def _row(cell: BenchCell, threads: int, m: Model, profile: ProfileData | None) -> BenchRow:
    pp, tg = f"pp{cell.n_prompt}", f"tg{cell.n_gen}"
    return BenchRow(
        test=f"{pp}+{tg}" if cell.n_prompt and cell.n_gen else pp if cell.n_prompt else tg,
        n_prompt=cell.n_prompt,
        n_gen=cell.n_gen,
        n_depth=cell.n_depth,
        n_threads=threads,
        n_batch=cell.n_batch,
        n_ubatch=cell.n_ubatch,
        n_seq=cell.n_seq,
        samples_ns=cell.samples_ns,
        model_ns=cell.model_ns,
        split=_split(cell, m, profile),
    )


def _split(cell: BenchCell, m: Model, profile: ProfileData | None) -> list[NodeTime]:
    """Each node's median over the cell's profiled repetitions (and a tg test's steps)."""
    if profile is None or not cell.profiled_runs or not profile.node:
        return []
    grid = per_run_grid(profile)
    columns = [k for rep in cell.profiled_runs for k in rep if k < grid.shape[1]]
    if not columns:
        return []
    us = np.median(grid[:, columns], axis=1)
    total = float(us.sum()) or 1.0
    layers = m.layers
    return [
        NodeTime(
            node,
            op,
            layers.of(node) if layers is not None else None,
            float(t),
            float(t) / total,
        )
        for node, op, t in zip(profile.node, profile.op_type, us, strict=True)
        if t > 0
    ]


def _params(m: Model) -> int:
    from ortlab.core.onnx_util import walk_initializers

    return sum(math.prod(t.dims) for t in walk_initializers(m.proto.graph))
