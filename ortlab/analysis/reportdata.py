"""What the report measures before it renders: the placement join, profile and optimization
diff a report lacks (the doctor's reused), with the inputs they ran on, and the machine writing
the report. :mod:`ortlab.views.report` only renders what these functions return."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ortlab.analysis.benchmark import environment
from ortlab.analysis.generation.generate import GenerationResult, generate
from ortlab.analysis.optimizers.levels import optimization_diff
from ortlab.analysis.placement.measure import placement_run
from ortlab.analysis.profiling import profile_run
from ortlab.core.config import SessionConfig
from ortlab.core.eps import COMPILING_EPS
from ortlab.core.machine import cpu_flags
from ortlab.core.model import Model
from ortlab.core.runtime import Providers
from ortlab.core.stats import MIN_ROUNDS
from ortlab.engine.calls import as_config, edge
from ortlab.engine.providers import providers

if TYPE_CHECKING:
    from ortlab.analysis.optimizers.levels import OptimizationResult
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = [
    "GENERATION",
    "DoctorFacts",
    "ReportInputs",
    "ThisMachine",
    "gather",
    "this_machine",
]


class _Baseline(Protocol):
    @property
    def baseline(self) -> GenerationResult | None: ...


class DoctorFacts(Protocol):
    """What a report reuses of a doctor's result (``DoctorResult`` is one; the diagnosis
    layer sits above this one): the config it was asked about, its placement join and
    profile, and a decoder's baseline generation."""

    @property
    def requested(self) -> SessionConfig: ...
    @property
    def placement(self) -> PlacementResult | None: ...
    @property
    def profile(self) -> ProfileResult | None: ...
    @property
    def generation(self) -> _Baseline | None: ...
    @property
    def step(self) -> dict[str, int]: ...


DOCTORS_STEP = "the doctor's decoder step, as it timed every candidate"
"""Why a report's own sections run at a decoder step the doctor chose."""
GENERATION = (128, 32)
"""A decoder's report generation when none is given: prompt tokens, new tokens."""


@dataclass(frozen=True)
class ReportInputs:
    """The results a report shows, the ones it measured itself included."""

    profile: ProfileResult | None = None
    placement: PlacementResult | None = None
    optimization: OptimizationResult | None = None
    measured_here: dict[str, tuple[str, bool]] = field(default_factory=dict)
    """For each result measured here ('placement', 'profile', 'optimization'): the inputs it
    ran on (shapes text, synthetic)."""
    generation: GenerationResult | None = None
    """An LLM decoder's generation (given, the doctor's baseline, or measured here): the
    report's Generation section and its headline."""


@dataclass(frozen=True)
class ThisMachine:
    """The machine writing the report, for its Environment section."""

    environment: dict[str, str]
    providers: Providers
    cpu_flags: list[str]


def this_machine() -> ThisMachine:
    return ThisMachine(environment(), providers(), list(cpu_flags()))


def gather(
    m: Model,
    doctor: DoctorFacts | None = None,
    *,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    dims: Mapping[str, int] | None = None,
    profile: ProfileResult | None = None,
    placement: PlacementResult | None = None,
    optimization: OptimizationResult | None = None,
    compute: bool = True,
    levels: Sequence[str] = ("disabled", "basic", "extended", "all"),
    progress: bool | Callable[[int, int], None] = False,
    generation: GenerationResult | None = None,
) -> ReportInputs:
    """The results given, and with ``compute`` the missing placement join (whose profile is the
    report's profile) and optimization diff measured (the doctor's are reused); for an LLM
    decoder, its generation (the doctor's baseline, else :data:`GENERATION` measured here)."""
    here: dict[str, tuple[str, bool]] = {}
    doctors = doctor.generation if doctor is not None else None
    if generation is None and doctors is not None:
        generation = doctors.baseline
    asked = config if config is not None else (doctor.requested if doctor is not None else None)
    if generation is None and compute and m.decoder is not None:
        prompt, new = GENERATION
        generation = generate(
            m,
            as_config(asked),
            prompt=min(prompt, (m.decoder.max_length or prompt + new) - new),
            new_tokens=new,
            progress=progress,
        )
    if compute:
        cfg = as_config(asked)
        cfg = cfg.with_(fallback="allow")  # a fallback is reported, not raised, in a report
        chosen = () if cfg.providers == "auto" else cfg.providers
        todo_join = placement is None and (doctor is None or doctor.placement is None)
        todo_profile = profile is None and (doctor is None or doctor.profile is None)
        todo_levels = optimization is None and not set(chosen) & set(COMPILING_EPS)
        if todo_join or todo_profile or todo_levels:
            # one Run: the inputs every section measures with, said next to their figures
            ours = feeds is None and dims is None and doctor is not None and bool(doctor.step)
            at = doctor.step if ours and doctor is not None else dims
            run = edge(m, cfg, feeds, dims=at, runs=10, progress=progress)
            if ours:  # the decoder's step the doctor chose and profiled: the same shapes here
                run = run.derive(inputs=run.inputs.said_as(DOCTORS_STEP))
                feeds, dims = run.inputs, None
            inputs = (run.inputs.describe(), run.inputs.synthetic)
        if todo_join:  # one profiled session: the per-node join (graph) and the profile
            placement = placement_run(run.derive(warmup=2))
            here["placement"] = inputs
            if todo_profile:
                profile, todo_profile = placement.profile, False
                here["profile"] = inputs
        if todo_profile:
            profile = profile_run(run.derive(warmup=3))
            here["profile"] = inputs
        if todo_levels:
            optimization = optimization_diff(
                m, levels, cfg, feeds, dims=dims, rounds=MIN_ROUNDS, runs=5, progress=progress
            )
            here["optimization"] = inputs
    return ReportInputs(profile, placement, optimization, here, generation)
