"""The plumbing every measuring verb shares: normalise model/config/feeds, call the worker,
show a progress bar."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypedDict, TypeVar, Unpack, cast

import numpy as np

from ortlab.core.config import ConfigLike, SessionConfig
from ortlab.core.crashes import known_crashes
from ortlab.core.errors import RunError, SessionConfigError, WorkerCrashedError
from ortlab.core.feedcheck import validate_feeds
from ortlab.core.inputs import DimChoice, Feeds, FeedsLike, example_inputs, resolve_dims
from ortlab.core.machine import measured_load
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.run import ModelJob, Progress, Run
from ortlab.core.stats import Verdict, against_first
from ortlab.engine import tasks, tasks_cpu, tasks_timing
from ortlab.engine.session import SessionReport, warn_if_fallback
from ortlab.engine.worker import InProcessWorker, Worker, get_worker, task_name


def as_config(config: ConfigLike | None) -> SessionConfig:
    if config is None:
        return SessionConfig()
    if isinstance(config, SessionConfig):
        return config
    if isinstance(config, Mapping):
        return SessionConfig.from_json(config)  # names unknown fields instead of a TypeError
    raise SessionConfigError(
        f"config must be an ortlab.SessionConfig or a dict of its fields, not "
        f"{type(config).__name__}."
    )


class Reach(TypedDict, total=False):
    """What every measuring verb takes beside its model, config and feeds, passed on to
    :func:`edge` as it was given: ``dims`` (the dims the inputs are made at when no
    ``feeds`` are given; a dim left out is guessed, and the result says which), ``progress``
    (a progress bar, False for none, or a ``(done, total)`` callback) and ``timeout``
    (seconds before the worker is stopped and a clear error raised)."""

    dims: Mapping[str, int] | None
    progress: bool | Progress
    timeout: float | None


def edge(
    model: ModelLike,
    config: ConfigLike | None,
    feeds: FeedsLike | None,
    *,
    runs: int = 1,
    warmup: int = 0,
    seed: int = 0,
    **reach: Unpack[Reach],
) -> Run:
    """The public edge: what a verb was given, resolved once into a :class:`Run` — the model
    loaded and checked runnable, the config a :class:`SessionConfig`, the inputs the caller's
    feeds (validated) or feeds made at dims resolved once (:func:`fitted_dims`, each dim with
    its reason)."""
    m = load(model)
    cfg = as_config(config)
    m.check_runnable(custom_ops_registered=bool(cfg.custom_op_libraries))
    make = functools.partial(_made_inputs, m, seed)
    dims = reach.get("dims")
    inputs = validate_feeds(m, feeds) if feeds is not None else make(dims)
    return Run(
        m,
        cfg,
        inputs,
        runs=runs,
        warmup=warmup,
        progress=reach.get("progress", True),
        timeout=reach.get("timeout"),
        make_inputs=make,
    )


def _made_inputs(m: Model, seed: int, dims: Mapping[str, int] | None) -> Feeds:
    """``m``'s inputs at ``dims``: by role for a decoder (prompt, past: valid for every
    step), else at the dims resolved and fitted (:func:`fitted_dims`)."""
    if m.decoder is not None:
        return m.example_inputs(dims, seed)
    return example_inputs(m.signature, seed=seed, choices=fitted_dims(m, dims))


IMAGE_SIZES = (32, 48, 64, 96, 112, 128, 160, 192, 256, 320, 384, 448, 512, 640)
"""Image sizes tried, smallest first, for a guessed height or width the model does not run at."""
_FITTED: dict[tuple[Any, ...], dict[str, DimChoice]] = {}


def fitted_dims(model: Model, dims: Mapping[str, int] | None) -> dict[str, DimChoice]:
    """Every symbolic dim's value and why (:func:`resolve_dims`), with a guessed image height
    or width the model does not run at (a text recognizer made for height 48: 224 fails inside
    the network) replaced by the middle of the band of IMAGE_SIZES it runs at (32..64: 48),
    which the reason says. One run per size tried, on the CPU (the shapes a model takes are
    the model's), in the worker, once per model and dims (remembered); dims given are never
    changed, and nothing changes when the guesses run. Before any run, a guessed dim the graph
    broadcasts against a batch-like one is batch-like, and guesses whose run would not fit the
    memory free are shrunk or refused (:mod:`ortlab.engine.fitdims`)."""
    from ortlab.engine.fitdims import fit_guesses

    key = (model.fingerprint(), tuple(sorted((dims or {}).items())))
    if key in _FITTED:
        return dict(_FITTED[key])
    # what the graph does with a dim decides its guess, then the guesses must fit in memory
    choices = fit_guesses(model, resolve_dims(model.signature, dims))
    guessed = [c for c in choices.values() if c.why.startswith("guessed: image")]
    if not guessed:
        _FITTED[key] = choices
        return dict(choices)
    values = {n: c.value for n, c in choices.items()}
    if not _runs(model, values):
        for c in guessed:
            band = _band(model, values, c)
            if band:
                size = band[(len(band) - 1) // 2]
                values[c.name] = size
                choices[c.name] = DimChoice(
                    c.name,
                    size,
                    f"{c.why}: {c.value} did not run; of the typical sizes it "
                    f"ran at {band[0]}..{band[-1]}, {size} is the middle",
                )
                break
    _FITTED[key] = choices
    return dict(choices)


def _band(model: Model, values: dict[str, int], dim: DimChoice) -> list[int]:
    """The first run of consecutive IMAGE_SIZES the model runs at with ``dim`` set to each
    (a network made for one size takes a band around it: pooling rounds), smallest first; []
    if none."""
    band: list[int] = []
    for v in IMAGE_SIZES:
        if v != dim.value and _runs(model, {**values, dim.name: v}):
            band.append(v)
        elif band:
            break
    return band


def _runs(model: Model, dims: Mapping[str, int]) -> bool:
    """Whether one run at these dims (synthesized inputs) succeeds."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        feeds = model.example_inputs(dims=dims)
    try:
        run(
            tasks.outputs,
            Via(desc="dims"),
            job=ModelJob(str(model.path), model.name, SessionConfig(), feeds),
        )
    except RunError:
        return False
    return True


def default_timeout() -> float | None:
    value = os.environ.get("ORTLAB_TIMEOUT_S")
    return float(value) if value else None


P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Via:
    """How a worker call shows and bounds itself: the progress bar's label, the words that
    name it in an error, the progress (a bar, a callback, or nothing) and the timeout."""

    desc: str = ""
    context: str = ""
    progress: bool | Progress = False
    timeout: float | None = None
    worker: Worker | InProcessWorker | None = None
    """The worker to call (another onnxruntime version's, or this process for debugging);
    None, this process's default."""
    unit: str = "run"
    """What the progress bar counts (runs; a generation's tokens)."""


def run(
    task: Callable[Concatenate[Progress, P], R], via: Via, /, *args: P.args, **kwargs: P.kwargs
) -> R:
    """``task(progress, **kwargs)`` in the worker, called by reference: mypy checks the
    arguments against the task's own signature and gives its return type."""
    if args:
        raise TypeError(f"{task_name(task)}: a task takes keyword arguments only")
    return cast("R", call(task, dict(kwargs), via))


def call(task: str | Callable[..., object], kwargs: Mapping[str, object], via: Via) -> Any:
    """Run a worker task as ``via`` says: a tqdm.auto progress bar labelled ``via.desc`` (or
    a callback, or nothing), its timeout (None: ORTLAB_TIMEOUT_S, else none) and worker
    (None: the default). ``task`` is the task function or its name (:func:`run` checks the
    arguments too)."""
    task = task_name(task)
    progress, context, unit = via.progress, via.context, via.unit
    timeout = via.timeout if via.timeout is not None else default_timeout()
    target: Worker | InProcessWorker = via.worker if via.worker is not None else get_worker()
    if callable(progress):
        return target.call(task, kwargs, timeout=timeout, progress=progress, context=context)
    if not progress:
        return target.call(task, kwargs, timeout=timeout, context=context)
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=via.desc, unit=unit, leave=False)
    try:

        def update(done: int, total: int) -> None:
            if bar.total != total:
                bar.total = total
            bar.n = done
            bar.refresh()

        return target.call(task, kwargs, timeout=timeout, progress=update, context=context)
    finally:
        bar.close()


def check_report(report: SessionReport | None, config: SessionConfig, model: Model) -> None:
    """Surface a provider fallback recorded in a session report as a warning (or an error,
    as the config's ``fallback`` says)."""
    if report is not None:
        warn_if_fallback(report, config, model.name)


class ModelReply(Protocol):
    """What every model task replies with: its session's report, among the rest."""

    @property
    def report(self) -> SessionReport | None: ...


Reply = TypeVar("Reply", bound=ModelReply)


def run_model_task(
    task: Callable[Concatenate[Progress, ModelJob, P], Reply],
    run: Run,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> Reply:
    """``task(progress, run.job, **kwargs)`` in the worker for ``run`` (its progress, its
    timeout), typed by the task's own signature; a provider fallback its session report
    records is surfaced (a warning, or an error as the config's ``fallback`` says), and a
    failure at guessed shapes says which dims were guessed."""
    if args:
        raise TypeError(f"{task_name(task)}: a task takes keyword arguments only")
    m, cfg = run.model, run.config
    unit = run.unit
    counted = (
        f" ({kwargs['runs']} runs x {kwargs['new_tokens']} tokens"
        + (", then the profiled steps)" if kwargs.get("profile") else ")")
        if unit == "token" and "runs" in kwargs and "new_tokens" in kwargs
        else ""
    )
    try:
        desc = f"{task_name(task).rpartition(':')[2]} {m.name}{counted}"
        via = Via(desc, run.context, run.progress, run.timeout, unit=unit)
        out = call(task, {"job": run.job, **kwargs}, via)
    except RunError as err:
        if not run.inputs.guessed():
            raise
        raise RunError(f"{err} {run.inputs.guessed()}") from err
    except WorkerCrashedError as err:
        known = known_crashes(m.proto)
        if not known:
            raise
        head, cut, tail = str(err).partition("\nWorker output")
        raise WorkerCrashedError(f"{head}\n{' '.join(known)}{cut}{tail}") from err
    reply = cast("Reply", out)
    check_report(reply.report, cfg, m)
    return reply


PAIRWISE = (
    "timed in pairs: the sessions together would not fit in memory, so the reference ran with "
    "one candidate at a time, each pair interleaved for every round (each ratio is its own "
    "pair's; a candidate's p50 is scaled to the first pair's reference)"
)


@dataclass(frozen=True)
class Interleaved:
    """(model, config) items timed interleaved in one worker (A B C, C B A …, so drift hits
    them all): what compare_configs, compare, optimization_diff, ablate_optimizers and the
    doctor's search read their times from."""

    medians_ms: np.ndarray
    """Per round (rows) and item (columns, one per item always), the median of the round's
    runs; NaN where the item failed."""
    latencies_ns: list[list[int]]
    """Per item, every timed run (ns, as the clock gave them; empty where it failed)."""
    reports: list[SessionReport | None]
    """Per item, its session's report (None where it failed)."""
    failed: dict[int, str]
    """Items the worker could not build or run (never the first: its failure raises)."""
    rounds: int
    runs: int
    other_cores: float | None = None
    """Cores other processes used on average while the rounds ran (None: not measured)."""
    notes: tuple[str, ...] = ()
    """How the rounds ran, where it changes how to read them (pairwise, see PAIRWISE)."""

    def verdicts(self, labels: Sequence[str]) -> dict[int, tuple[Verdict, str]]:
        """Per item that ran, its paired verdict against the first and the sentence."""
        return against_first(self.medians_ms, labels, self.failed)


T_co = TypeVar("T_co", covariant=True)


class _RoundsTask(Protocol[T_co]):
    """A worker task that measures (model, config) items in rounds at one set of feeds
    (:func:`ortlab.engine.tasks_timing.interleaved`, :func:`ortlab.engine.tasks_cpu.cpu_costs`)."""

    def __call__(
        self,
        progress: Progress,
        /,
        *,
        items: list[tuple[str, str, SessionConfig]],
        feeds: FeedsLike,
        rounds: int,
        runs: int,
    ) -> T_co: ...


def _in_rounds(
    task: _RoundsTask[R],
    items: Sequence[tuple[Model, SessionConfig]],
    base: Run,
    *,
    said: tuple[str, str],
    rounds: int,
    runs: int,
) -> tuple[R, float | None]:
    """``task``'s reply on ``items`` in the worker at ``base``'s inputs, progress and timeout
    (``said``: the bar's label and the words naming the call in an error), ``rounds`` rounds
    of ``runs`` runs, and the cores other processes used meanwhile (None: not measured)."""
    desc, context = said
    with measured_load() as load:
        out = run(
            task,
            Via(desc=desc, context=context, progress=base.progress, timeout=base.timeout),
            items=[(str(m.path), m.name, c) for m, c in items],
            feeds=dict(base.inputs),
            rounds=rounds,
            runs=runs,
        )
    return out, load.cores


def measure_interleaved(
    items: Sequence[tuple[Model, SessionConfig]],
    base: Run,
    *,
    rounds: int,
    desc: str,
    context: str,
) -> Interleaved:
    """Time ``items`` interleaved in the worker at ``base``'s inputs, ``rounds`` rounds of
    ``base.runs`` runs each (``base``'s progress and timeout), the first item the reference.
    The one fallback policy: every item's session report is checked against its own config
    (a requested EP that did not load warns or raises as that config's ``fallback`` says),
    each distinct miss said once (ten variants under one config that all lost CUDA are one
    warning)."""
    out, other_cores = _in_rounds(
        tasks_timing.interleaved, items, base, said=(desc, context), rounds=rounds, runs=base.runs
    )
    reports = list(out.reports)
    said: set[tuple[Any, ...]] = set()
    for (m, c), report in zip(items, reports, strict=True):
        miss = (tuple(report.missing), c.fallback) if report is not None else None
        if miss is not None and miss not in said:
            said.add(miss)
            check_report(report, c, m)
    failed = {int(k): str(v) for k, v in out.failed.items()}
    medians = np.atleast_2d(np.asarray(out.medians_ns, dtype=np.float64)) / 1e6
    latencies = [list(lat) for lat in out.latencies_ns]
    if medians.shape[1] < len(items):  # columns of those that ran only: NaN for the others
        ran = [k for k in range(len(items)) if k not in failed]
        full = np.full((len(medians), len(items)), np.nan)
        full[:, ran] = medians
        medians = full
        if len(latencies) == len(ran):
            spread: list[list[int]] = [[] for _ in items]
            for k, lat in zip(ran, latencies, strict=True):
                spread[k] = lat
            latencies = spread
    return Interleaved(
        medians_ms=medians,
        latencies_ns=latencies,
        reports=reports,
        failed=failed,
        rounds=len(medians),
        runs=base.runs,
        other_cores=other_cores,
        notes=(PAIRWISE,) if out.pairwise else (),
    )


@dataclass(frozen=True)
class CpuRounds:
    """(model, config) items' CPU cost measured in rounds in one worker
    (:func:`ortlab.engine.tasks_cpu.cpu_costs`): per round (rows) and item (columns), the CPU
    time per run over every thread, the wall time per run and the cores kept busy in the idle
    window after the runs; NaN where an item failed."""

    cpu_ms: np.ndarray
    wall_ms: np.ndarray
    idle_cores: np.ndarray
    failed: dict[int, str]
    runs: int
    """Timed runs per item and round (one block: its CPU over them, per run)."""
    interleaved: bool
    """False when the sessions did not fit in memory together (each item's rounds in turn)."""
    other_cores: float | None = None
    """Cores other processes used on average meanwhile (None: not measured)."""


def measure_cpu(
    items: Sequence[tuple[Model, SessionConfig]],
    base: Run,
    *,
    rounds: int,
    runs: int,
    desc: str,
    context: str,
) -> CpuRounds:
    """The CPU cost of ``items`` at ``base``'s inputs (``base``'s progress and timeout), the
    first item the reference; each item's session report is checked like
    :func:`measure_interleaved`'s."""
    out, other_cores = _in_rounds(
        tasks_cpu.cpu_costs, items, base, said=(desc, context), rounds=rounds, runs=runs
    )
    per_run = max(out.runs, 1) * 1e6
    return CpuRounds(
        cpu_ms=np.asarray(out.cpu_ns, dtype=np.float64).reshape(rounds, len(items)) / per_run,
        wall_ms=np.asarray(out.wall_ns, dtype=np.float64).reshape(rounds, len(items)) / per_run,
        idle_cores=np.asarray(out.idle_cores, dtype=np.float64).reshape(rounds, len(items)),
        failed={int(k): str(v) for k, v in out.failed.items()},
        runs=out.runs,
        interleaved=out.interleaved,
        other_cores=other_cores,
    )
