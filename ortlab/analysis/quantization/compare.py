"""Model variants side by side: latency (interleaved), size, output error, kernels that ran,
and where the quantization error is.

Accuracy figures computed from synthetic inputs are marked ``synthetic`` everywhere: random
inputs say whether the arithmetic drifted, not whether the model still answers correctly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ortlab.analysis.quantization.metrics import error_metrics, sqnr_db
from ortlab.analysis.quantization.quantize import calibration_data, precision_label
from ortlab.analysis.quantization.variants import Signal, VariantRow, variant_row, variant_signals
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError, OrtlabWarning, error_text
from ortlab.core.machine import cpu_flags, load_sentence
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.result import Result, Table
from ortlab.core.stats import Paired, against_first, spread
from ortlab.engine import tasks
from ortlab.engine.calls import (
    Via,
    edge,
    measure_interleaved,
)
from ortlab.engine.calls import run as run_task

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike
    from ortlab.engine.trace import ProfileData

__all__ = ["CompareResult", "compare", "error_metrics", "sqnr_db"]


@dataclass(frozen=True)
class CompareResult(Result):
    model: str
    config: SessionConfig
    rows: list[VariantRow]
    signals: list[Signal]
    eval_data: str
    synthetic: bool
    cpu_flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Which samples and shapes the figures come from, and warnings (degenerate outputs)."""
    feeds: str = ""
    """The inputs the variants were timed with (names, dtypes, shapes)."""
    feeds_synthetic: bool | None = None
    """True when ortlab synthesized the timing inputs (``synthetic`` is about the accuracy
    samples)."""

    def to_pandas(self) -> Table:
        """variant, file_mb, size_ratio, p50_ms, p90_ms, ratio (to the original), ratio_low,
        ratio_high, verdict, cosine, sqnr_db, max_abs, top1 (first float output),
        labels_equal (the lowest exact agreement of label outputs, None without any),
        quantized kernels, synthetic."""
        import pandas as pd

        rows = []
        for r in self.rows:
            first = r.first_float()
            rows.append(
                {
                    "variant": r.variant,
                    "file_mb": r.file_bytes / 1e6,
                    "size_ratio": r.size_ratio,
                    "p50_ms": r.p50_ms,
                    "p90_ms": r.p90_ms,
                    **spread(r.paired),
                    "cosine": first.get("cosine"),
                    "sqnr_db": first.get("sqnr_db"),
                    "max_abs": first.get("max_abs"),
                    "top1": first.get("top1_agreement"),
                    "labels_equal": r.labels_equal(),
                    "quantized_kernels": ", ".join(
                        f"{k}×{v}" for k, v in r.quantized_kernels.items()
                    ),
                    "synthetic": r.synthetic,
                }
            )
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        parts = [
            f"{r.variant} {r.paired.ratio:.2f}x time, {r.size_ratio:.2f}x size"
            for r in self.rows[1:]
        ]
        mark = " (accuracy from SYNTHETIC inputs)" if self.synthetic else ""
        return f"<CompareResult {self.model!r}: " + "; ".join(parts) + f"{mark}>"


def compare(
    model: ModelLike,
    variants: Sequence[ModelLike],
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    eval_data: object = None,
    rounds: int = 8,
    runs: int = 10,
    dims: Mapping[str, int] | None = None,
    progress: bool | Callable[[int, int], None] = False,
    timeout: float | None = None,
) -> CompareResult:
    """Time ``model`` and its ``variants`` interleaved, and measure each variant's output error.

    Accuracy is measured at the shapes that are timed: without ``eval_data``, samples are
    synthesized at the shapes of ``feeds`` (or ``dims``). A variant whose session cannot be
    built or run gets a row saying so; the others are still compared."""

    run = edge(model, config, feeds, dims=dims, runs=runs, progress=progress, timeout=timeout)
    base, cfg, f = run.model, run.config, run.inputs
    models = [base] + [load(v) for v in variants]
    labels = [f"original ({precision_label(base)})"]
    labels += [getattr(v.variant, "label", None) or v.name for v in models[1:]]
    context = f"of {base.name!r} variants with {cfg.label()}"
    timed = measure_interleaved(
        [(m, cfg) for m in models], run, rounds=rounds, desc="compare", context=context
    )
    failed = dict(timed.failed)
    evald = calibration_data(base, eval_data, limit=8, seed=100, like=f)
    outputs: dict[int, list[dict[str, np.ndarray]]] = {}
    profiles: dict[int, ProfileData] = {}
    for k, m in enumerate(models):
        if k in failed:
            continue
        try:
            outputs[k] = run_task(
                tasks.outputs_many,
                Via("outputs", context, timeout=timeout),
                model_path=str(m.path),
                model_name=m.name,
                config=cfg,
                samples=evald.samples,
                seeded=bool(base.random_ops),
            )
            profiles[k] = run_task(
                tasks.profile,
                Via("profile", context, timeout=timeout),
                job=run.with_(model=m).job,
                runs=3,
                warmup=1,
            ).data
        except OrtlabError as err:
            if k == 0:
                raise
            failed[k] = error_text(err)
    live = [k for k in range(len(models)) if k not in failed]
    verdicts = against_first(timed.medians_ms, labels, failed)  # failures while scoring too
    rows = [
        _failed_variant(m, labels[k], base, failed[k], evald.synthetic)
        if k in failed
        else variant_row(
            k,
            m,
            labels[k],
            base=base,
            verdict=verdicts[k],
            lat=timed.latencies_ns[k],
            outputs=[outputs[0], outputs[k]],
            data=profiles[k],
            synthetic=evald.synthetic,
            against=1,
        )
        for k, m in enumerate(models)
    ]
    flags = cpu_flags()
    notes = [
        f"accuracy measured on {evald.source}",
        f"timed with {f.shapes_text()}",
        load_sentence(timed.other_cores),
        *timed.notes,
    ]
    notes += [base.random_note()] if base.random_ops else []
    notes += _reference_notes(rows[0])
    notes += list(dict.fromkeys(n for r in rows for n in r.scoring))
    return CompareResult(
        model=base.name,
        config=cfg,
        rows=rows,
        signals=variant_signals(
            [models[k] for k in live],
            [rows[k] for k in live],
            [profiles[k] for k in live],
            cfg,
            flags,
        ),
        eval_data=evald.source,
        synthetic=evald.synthetic,
        cpu_flags=flags,
        notes=notes,
        feeds=f.describe(),
        feeds_synthetic=f.synthetic,
    )


def _reference_notes(row: VariantRow) -> list[str]:
    """Warn when the float model itself gives degenerate outputs (NaN, all zeros): every
    accuracy figure against it is then meaningless."""
    import warnings

    out = []
    for name, metrics in row.errors.items():
        why = str(metrics.get("degenerate", ""))
        if why.startswith("the float model"):
            out.append(f"output {name!r}: {why}; accuracy against it cannot be scored")
    for text in out:
        warnings.warn(text, OrtlabWarning, stacklevel=3)
    return out


def _failed_variant(m: Model, label: str, base: Model, why: str, synthetic: bool) -> VariantRow:
    nan = float("nan")
    return VariantRow(
        variant=label,
        path=str(m.path),
        file_bytes=m.disk_bytes,
        size_ratio=m.disk_bytes / max(base.disk_bytes, 1),
        p50_ms=nan,
        p90_ms=nan,
        paired=Paired.untimed(f"failed: {why}"),
        errors={},
        kernels={},
        quantized_kernels={},
        steps=list(m.variant.steps) if getattr(m, "variant", None) else [],
        synthetic=synthetic,
        error=why,
    )
