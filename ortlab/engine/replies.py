"""What the worker's model tasks send back, as typed records: the caller reads fields mypy
checks, not keys in a dict. Each travels pickled over the worker's connection. Every task's
reply type lives here (a test reads every task module's return types and finds them here)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ortlab.core.onnx_util import Attr
from ortlab.engine.session import SessionReport
from ortlab.engine.trace import ProfileData

__all__ = [
    "AloneReply",
    "BenchmarkReply",
    "CpuCostReply",
    "DivergeReply",
    "FootprintSample",
    "GraphNode",
    "InterleavedReply",
    "OutputsReply",
    "PeakRuns",
    "PeaksReply",
    "PlacementReply",
    "ProfileReply",
    "QuantizeReply",
    "SavedLevel",
    "ShapesReply",
    "TargetEvidence",
    "TensorStats",
    "ThroughputReply",
    "TransformerReply",
    "WhatIfReply",
    "Window",
]

FinalNodes = list[tuple[str, str, str, tuple[str, ...], tuple[str, ...], str]]
"""A saved graph's nodes (name, op_type, domain, inputs, outputs, parent or provider)."""


@dataclass(frozen=True)
class BenchmarkReply:
    """``tasks_timing.benchmark``: every timed run, the session's report, whether the session
    came from the worker's cache, the warm-up runs, and ORT's own time (builds and runs)."""

    latencies_ns: list[int]
    report: SessionReport
    cached_session: bool
    warmup: int
    ort_ms: float
    cpu_ns_per_run: float = math.nan
    """CPU time of the worker process (every thread) over the timed runs, per run."""
    idle_cores: float = math.nan
    """Cores the process kept busy in the moment after its last run, its own thread asleep."""


@dataclass(frozen=True)
class ProfileReply:
    """``tasks.profile``: the parsed trace and the session's report."""

    data: ProfileData
    report: SessionReport


@dataclass(frozen=True)
class PlacementReply:
    """``tasks.placement``: the profiled runs and the three placement sources (ORT's
    assignment, the verbose log's placements, the final graph) with the EP probes."""

    report: SessionReport
    data: ProfileData
    assignment: list[tuple[str, list[tuple[str, str, str]]]]
    """ORT's assignment API: per EP, its nodes (name, op_type, domain)."""
    placements: dict[str, str]
    """The verbose "Node placements" log, parsed: node name -> EP."""
    final: FinalNodes
    """The final graph's nodes (name, op_type, domain, inputs, outputs, provider)."""
    final_source: str
    """'EPContext dump' or 'optimized model'."""
    probes: dict[str, str]
    """Nodes probed one at a time on the EP that did not take them: name -> 'taken' or
    'refused' (:func:`ortlab.engine.probe.probe_nodes`)."""
    ort_ms: float


@dataclass(frozen=True)
class InterleavedReply:
    """``tasks_timing.interleaved``: per round and item the median of its runs (ns; NaN where
    the item failed), per item every timed run and its session's report (None where it
    failed), the items that failed (index -> why) and whether the items ran in pairs."""

    medians_ns: list[list[float]]
    latencies_ns: list[list[int]]
    reports: list[SessionReport | None]
    failed: dict[int, str]
    pairwise: bool = False


@dataclass(frozen=True)
class CpuCostReply:
    """``tasks_cpu.cpu_costs``: per round and item, the worker's CPU time over the item's timed
    runs (ns, every thread), their wall time (ns) and the cores the process kept busy in the
    idle window after them (NaN where the item failed); the items that failed (index -> why)."""

    cpu_ns: list[list[float]]
    wall_ns: list[list[float]]
    idle_cores: list[list[float]]
    runs: int
    failed: dict[int, str]
    interleaved: bool = True
    """False when the sessions did not fit in memory together: each item ran its rounds in
    turn."""


@dataclass(frozen=True)
class OutputsReply:
    """``tasks.outputs``: one run's outputs by output name, and the session's report."""

    outputs: dict[str, np.ndarray]
    """As numpy arrays (a sequence or map output as ``to_numpy`` gives it)."""
    report: SessionReport


@dataclass(frozen=True)
class SavedLevel:
    """``tasks.optimize_levels``, per level: ORT's optimized model saved at ``path`` (its
    weights in a side file), the session's report (the transformers that fired) and the saved
    graph's nodes."""

    path: str
    report: SessionReport
    final: FinalNodes


@dataclass(frozen=True)
class QuantizeReply:
    """``tasks_transform.quantize``: the steps taken and the last lines ORT printed."""

    steps: list[str]
    log: list[str]


@dataclass(frozen=True)
class TransformerReply:
    """``tasks_transform.transformer_optimize``: the fused operators counted by the optimizer,
    whether it says the model is fully optimized, and its log."""

    stats: dict[str, int]
    fully_optimized: bool
    log: list[str]


@dataclass(frozen=True)
class TensorStats:
    """``tasks_transform.tensor_errors``, per float tensor: the variant's error against it over
    the samples (NaN where the shapes differ or a value is not finite)."""

    sqnr_db: float
    cosine: float
    max_abs: float
    mean_abs: float
    shape_mismatch: bool
    nonfinite: bool


@dataclass(frozen=True)
class DivergeReply:
    """``tasks_diverge.diverge_errors``: per reference tensor the other side's error against
    it (exposed as outputs, in groups), the final outputs' error with nothing exposed, and the
    session runs it took."""

    tensors: dict[str, TensorStats]
    finals: dict[str, TensorStats]
    session_runs: int


@dataclass(frozen=True)
class ProbeReply:
    """``tasks_diverge.probe``: one tensor's error with only it exposed (None where a side
    does not compute it) and the final outputs' error in those same runs."""

    stats: TensorStats | None
    finals: dict[str, TensorStats]


@dataclass(frozen=True)
class AloneReply:
    """``tasks_diverge.alone``: the other side's node run alone on the reference's inputs,
    against the reference's output; those inputs (the reference's values, a repro's)."""

    stats: TensorStats
    inputs: dict[str, np.ndarray]
    reference_kernels: list[str] = field(default_factory=list)
    """What the reference's session made of the region ('OpType name' each)."""
    other_kernels: list[str] = field(default_factory=list)
    reference_provider: str = ""
    """The EP that ran the region's last node on the reference's side ('' unknown)."""
    other_provider: str = ""


@dataclass(frozen=True)
class SoakPhase:
    """``tasks_memory.soak``, one phase of one setting: the resident bytes and the bytes ORT's
    arena had extended by after each run, and why it stopped early ('' when it did not)."""

    phase: str
    rss: list[int]
    arena: list[int]
    note: str = ""


@dataclass(frozen=True)
class SoakSetting:
    """``tasks_memory.soak``, one setting's process: its phases, or why it failed."""

    setting: str
    series: list[SoakPhase]
    error: str = ""
    other_cores: float | None = None
    """Cores other processes used on average while it was measured (None: not known)."""
    measured: int = 1
    """Times it was measured: twice when other processes kept the machine busy the first
    time (the less loaded measurement is the one kept)."""


@dataclass(frozen=True)
class FootprintSample:
    """``tasks_memory.footprint``, one fresh process: the resident bytes the session added
    (created, held after the runs, at its peak; None where the system does not say) and its
    creation time, or why the measurement failed."""

    error: str = ""
    create_ms: float = math.nan
    created_bytes: float | None = None
    held_bytes: float | None = None
    peak_bytes: float | None = None
    file_bytes: float | None = None
    """Of ``held_bytes``, the file pages (library code) the forked child faulted in again as
    it built and ran the session: the footprint's fixed offset (``_footprint_child``)."""


@dataclass(frozen=True)
class TargetEvidence:
    """``tasks_whatif.whatif``, per target: the raw evidence. ``unknown`` says why there is no
    prediction; else a compile (assignment, per-node log lines, the partitioned graph), the
    mobile checker's verdicts (``verdicts`` not None) or a session here (``measured``), with
    ``error`` when the compile or run failed. None marks what the evidence does not have."""

    unknown: str = ""
    assignment: list[tuple[str, list[tuple[str, str]]]] | None = None
    """Per EP, its nodes: (ep, [(node, op_type), ...])."""
    active: list[str] | None = None
    log: list[str] | None = None
    final: FinalNodes | None = None
    """The partitioned graph's nodes (name, op_type, domain, inputs, outputs, parent)."""
    error: str = ""
    measured: bool = False
    seconds: float = 0.0
    total_seconds: float = 0.0
    process_seconds: float | None = None
    version: str | None = None
    """The plugin's version (compiled evidence)."""
    verdicts: dict[str, str] | None = None
    """Per node, the checker's reason ('' where supported)."""
    groups: list[list[str]] | None = None
    counts: dict[str, int] | None = None
    """The checker's own counts, by ORT's names (num_nodes, num_partitions, ...)."""
    ops_file: str | None = None
    caveats: list[str] | None = None


@dataclass(frozen=True)
class WhatIfReply:
    """``tasks_whatif.whatif``: the model the targets saw (a fixed-shape copy when shapes were
    given), each target's evidence by its alias, and the worker's onnxruntime version."""

    path: str
    targets: dict[str, TargetEvidence]
    ort_version: str


@dataclass(frozen=True)
class PeakRuns:
    """One peak's measurement: what ran, the work of one run, and each run's seconds."""

    what: str
    """'fp32 GEMM', 'int8 GEMM', 'fp16 GEMM', 'fp32 stream (Add)' or 'fp32 L3-resident (Add)'."""
    dtype: str
    """The precision it stands for (fp32, int8, fp16), 'memory' (DRAM) or a cache level (L2, L3)."""
    work: float
    """FLOPs (a GEMM) or bytes (the stream) one run does."""
    seconds: list[float]
    error: str = ""
    """Why it could not be measured (this EP has no such kernel…); then ``seconds`` is empty."""


@dataclass(frozen=True)
class PeaksReply:
    runs: list[PeakRuns]


@dataclass(frozen=True)
class GraphNode:
    """A node of the graph ORT ran: its name as the profile names it, and what a cost formula
    reads (input/output tensor names, scalar and list attributes)."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[tuple[str, Attr], ...]


@dataclass(frozen=True)
class ShapesReply:
    """The profiled run, the graph ORT ran, and (dtype, dims) per tensor name."""

    data: ProfileData
    report: SessionReport
    nodes: tuple[GraphNode, ...]
    tensors: dict[str, tuple[str, tuple[int, ...]]]
    """Per tensor name: ORT's dtype name ('float', 'float16', 'uint8'…) and its dims."""
    initializers: frozenset[str]
    """The tensors that are weights (initializers of the graph ORT ran)."""
    peaks: list[PeakRuns] = field(default_factory=list)
    """With ``peaks``: the peak kernels' runs, just before the model's."""


@dataclass(frozen=True)
class Window:
    """One timed window of one (mode, concurrency) item in one round."""

    mode: str
    concurrency: int
    round: int
    completed: int
    """Requests that finished in the window (every one its threads started)."""
    window_ns: int
    """From the threads' release to the last request's end."""
    latencies_ns: list[int]
    """Every request's own time, all threads together."""
    sessions: int
    """Distinct sessions the window's threads ran (1 when shared, c per thread)."""


@dataclass(frozen=True)
class ThroughputReply:
    """``tasks_throughput.throughput``: every window, the shared session's report, how many
    sessions the per-thread mode built, and the worker machine's core count."""

    windows: list[Window]
    report: SessionReport
    sessions_built: int
    """Sessions built for the per-thread mode (the largest concurrency; 0 without it)."""
    cpu_count: int


@dataclass(frozen=True)
class GenerateReply:
    """``tasks_generate.generate``: per run and step the whole step's time as a generator runs
    it (ns; step 0 is the prefill) and the model's ``sess.run`` within it, the greedy tokens
    (the same every run), the present outputs' bytes after each step of the first run, the
    process's resident memory before and after it, the session's report and the cores other
    processes used meanwhile."""

    steps_ns: list[list[int]]
    run_ns: list[list[int]]
    tokens: list[int]
    present_bytes: list[int]
    rss_before: int
    rss_after: int
    report: SessionReport
    other_cores: float | None = None
    profile: ProfileData | None = None
    """More generations with ORT's profiler on: run k of its trace is step k % profiled_steps
    of generation k // profiled_steps."""
    profiled_steps: int = 0
    profiled_reps: int = 0
    first_steps: int = 0
    """After the profiled generations, this many of their first step alone (the trace's
    last runs): more samples of the once-a-generation phases."""
    encoder_ns: list[int] = field(default_factory=list)
    """An encoder-decoder's encoder per run, whole (its run and binding its states)."""
    encoder_run_ns: list[int] = field(default_factory=list)
    """The encoder's ``sess.run`` alone per run."""
    encoder_profile: ProfileData | None = None
    """The encoder's profiled runs (run k: profiled generation k's)."""


@dataclass(frozen=True)
class Footprint:
    """The least memory a run at some shapes needs, from the shapes alone."""

    largest: str
    """The largest tensor's name."""
    largest_bytes: int
    peak_bytes: int
    """A lower bound of the run's peak: the weights, plus the largest node's inputs and
    outputs alive at once."""


@dataclass(frozen=True)
class DimFacts:
    """``tasks_dims.dim_facts``: the input symbols the graph unifies ({symbol: the one it
    became}) and the footprints of the candidate dims asked for, in order, up to the first
    that fits (None: inference could not give the shapes)."""

    merges: dict[str, str]
    footprints: list[Footprint | None]


@dataclass(frozen=True)
class GenerationPair:
    """One candidate generating against the baseline, interleaved (A B, B A, …): per round
    each one's prefill time and its decode steps' total time (ns), and each one's greedy
    tokens."""

    base_prefill_ns: list[int]
    base_decode_ns: list[int]
    prefill_ns: list[int]
    decode_ns: list[int]
    base_tokens: list[int]
    tokens: list[int]
    report: SessionReport


@dataclass(frozen=True)
class GenerationsReply:
    """``tasks_generate.interleaved``: one :class:`GenerationPair` per candidate (None where
    its session could not be built or its first generation failed: ``failed``, by the
    candidate's index, says why), and the cores other processes used meanwhile."""

    pairs: list[GenerationPair | None]
    report: SessionReport
    """The baseline's session."""
    failed: dict[int, str] = field(default_factory=dict)
    other_cores: float | None = None


@dataclass(frozen=True)
class BenchCell:
    """``tasks_bench.bench``: one llama-bench test at one depth, sequence count and prompt
    batch — per repetition its timed steps' whole time and their ``sess.run`` within (ns), and
    per profiled repetition the trace runs of those steps."""

    n_prompt: int
    n_gen: int
    n_depth: int
    n_seq: int
    n_batch: int
    n_ubatch: int
    samples_ns: list[int]
    model_ns: list[int]
    profiled_runs: list[list[int]] = field(default_factory=list)


@dataclass(frozen=True)
class LLMBenchReply:
    """``tasks_bench.bench``: every cell on one session (one thread setting), the session's
    report, the cores other processes used while the cells were timed, and the trace of the
    profiled repetitions (None without)."""

    cells: list[BenchCell]
    report: SessionReport
    other_cores: float | None = None
    profile: ProfileData | None = None


@dataclass(frozen=True)
class TokenDivergence:
    """One variant against the reference over a token stream: per position, KL(reference ||
    variant) of the next-token distributions (nats) and whether the top tokens agree."""

    kl: list[float]
    agree: list[bool]


@dataclass(frozen=True)
class DivergenceReply:
    """``tasks_kld.divergence``: the positions read and each variant's divergence (None where
    it failed: ``failed`` maps its index to why)."""

    positions: int
    variants: list[TokenDivergence | None]
    report: SessionReport
    """The reference's session."""
    failed: dict[int, str] = field(default_factory=dict)
