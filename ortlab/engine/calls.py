"""The plumbing every measuring verb shares: normalise model/config/feeds, call the worker,
show a progress bar."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ortlab.core.config import SessionConfig
from ortlab.core.errors import RunError, SessionConfigError
from ortlab.core.inputs import Feeds, validate_feeds
from ortlab.core.model import Model, ModelLike, load
from ortlab.engine.session import SessionReport, warn_if_fallback
from ortlab.engine.worker import get_worker


def as_config(config: SessionConfig | Mapping[str, Any] | None) -> SessionConfig:
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


def prepare(
    model: ModelLike,
    config: SessionConfig | Mapping[str, Any] | None,
    feeds: Mapping[str, Any] | None,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
) -> tuple[Model, SessionConfig, Feeds]:
    m = load(model)
    cfg = as_config(config)
    m.check_runnable(custom_ops_registered=bool(cfg.custom_op_libraries))
    f = m.example_inputs(dims=dims, seed=seed) if feeds is None else validate_feeds(m, feeds)
    return m, cfg, f


def default_timeout() -> float | None:
    value = os.environ.get("ORTLAB_TIMEOUT_S")
    return float(value) if value else None


def call(
    task: str,
    kwargs: dict[str, Any],
    *,
    desc: str,
    context: str,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> Any:
    """Run a worker task with a tqdm.auto progress bar (or a callback, or nothing)."""
    worker = get_worker()
    if callable(progress):
        return worker.call(task, kwargs, timeout=timeout, progress=progress, context=context)
    if not progress:
        return worker.call(task, kwargs, timeout=timeout, context=context)
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=desc, unit="run", leave=False)
    try:

        def update(done: int, total: int) -> None:
            if bar.total != total:
                bar.total = total
            bar.n = done
            bar.refresh()

        return worker.call(task, kwargs, timeout=timeout, progress=update, context=context)
    finally:
        bar.close()


def check_report(out: Any, config: SessionConfig, model: Model) -> None:
    """Surface a provider fallback recorded in a task's session report as a warning."""

    report = out.get("report") if isinstance(out, dict) else out
    if isinstance(report, SessionReport):
        warn_if_fallback(report, config, model.name)


def run_model_task(
    task: str,
    model: ModelLike,
    config: SessionConfig | Mapping[str, Any] | None,
    feeds: Mapping[str, Any] | None,
    *,
    dims: Mapping[str, int] | None = None,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
    **extra: Any,
) -> tuple[Model, SessionConfig, Feeds, Any]:
    """The common path of benchmark/profile/placement: normalise, run ``task`` on the model
    under the config with the feeds (plus ``extra`` task arguments) in the worker, and surface
    a provider fallback recorded in its session report."""
    runs, warmup = extra.get("runs", 1), extra.get("warmup", 0)
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0 (got runs={runs}, warmup={warmup})")
    m, cfg, f = prepare(model, config, feeds, dims)
    try:
        out = call(
            task,
            {"model_path": str(m.path), "model_name": m.name, "config": cfg, "feeds": dict(f),
             **extra},
            desc=f"{task} {m.name}",
            context=f"of {m.name!r} with {cfg.label()}",
            progress=progress,
            timeout=timeout if timeout is not None else default_timeout(),
        )  # fmt: skip
    except RunError as err:
        if not f.guessed():
            raise
        raise RunError(f"{err} {f.guessed()}") from err
    check_report(out, cfg, m)
    return m, cfg, f, out
