"""Model variants side by side: latency (interleaved), size, output error, kernels that ran,
and where the quantization error is.

Accuracy figures computed from synthetic inputs are marked ``synthetic`` everywhere: random
inputs say whether the arithmetic drifted, not whether the model still answers correctly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortlab._result import Result
from ortlab.config import SessionConfig
from ortlab.errors import OrtlabError, OrtlabWarning, error_text
from ortlab.model import Model, load
from ortlab.quantization import QUANTIZED_OPS
from ortlab.runtime import cpu_flags
from ortlab.stats import NOISE_BAND, Verdict, against_first, latency_stats

__all__ = ["CompareResult", "compare", "error_metrics", "sqnr_db"]


def sqnr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when identical)."""
    r = np.asarray(ref, dtype=np.float64).ravel()
    t = np.asarray(test, dtype=np.float64).ravel()
    noise = float(np.sum((r - t) ** 2))
    signal = float(np.sum(r**2))
    if noise == 0:
        return float("inf")
    return 10 * np.log10(signal / noise) if signal > 0 else float("-inf")


def error_metrics(refs: Sequence[np.ndarray], tests: Sequence[np.ndarray]) -> dict[str, Any]:
    """max/mean abs error, cosine similarity and SQNR over all samples; top-1/top-5 agreement
    only for class scores (every sample's output is ``[batch, classes >= 10]``).

    Degenerate cases are named, never scored as perfect: ``degenerate`` says why cosine/SQNR
    are NaN (the float output holds NaN/Inf or is all zeros, or the variant's holds NaN/Inf)."""
    r = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in refs])
    t = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in tests])
    if r.shape != t.shape:
        raise ValueError(f"outputs differ in size: {r.size} vs {t.size} values")
    out: dict[str, Any] = {"max_abs": float("nan"), "mean_abs": float("nan"),
                           "cosine": float("nan"), "sqnr_db": float("nan")}  # fmt: skip
    why = _degenerate(r, t)
    if why:
        out["degenerate"] = why
    if not np.isfinite(r).all() or not np.isfinite(t).all():
        return out
    diff = np.abs(r - t)
    out["max_abs"] = float(diff.max()) if diff.size else 0.0
    out["mean_abs"] = float(diff.mean()) if diff.size else 0.0
    denom = float(np.linalg.norm(r) * np.linalg.norm(t))
    if denom:
        out["cosine"] = float(np.sum(r * t) / denom)
        out["sqnr_db"] = sqnr_db(r, t)
    if _class_scores(refs):
        rs = np.concatenate([np.asarray(x, dtype=np.float64) for x in refs])
        ts = np.concatenate([np.asarray(x, dtype=np.float64) for x in tests])
        top_r, top_t = np.argsort(-rs, axis=1), np.argsort(-ts, axis=1)
        out["top1_agreement"] = float(np.mean(top_r[:, 0] == top_t[:, 0]))
        out["top5_agreement"] = float(
            np.mean([len(set(a[:5]) & set(b[:5])) / 5 for a, b in zip(top_r, top_t, strict=True)])
        )
    return out


def _degenerate(r: np.ndarray, t: np.ndarray) -> str:
    if not np.isfinite(r).all():
        bad = int(np.size(r) - np.isfinite(r).sum())
        return f"the float model's output holds NaN/Inf ({bad:,} of {r.size:,} values)"
    if not np.isfinite(t).all():
        bad = int(np.size(t) - np.isfinite(t).sum())
        return f"the variant's output holds NaN/Inf ({bad:,} of {t.size:,} values)"
    if not np.any(r):
        same = not np.any(t)
        return "the float model's output is all zeros" + (
            " (the variant's too: identical)" if same else ""
        )
    return ""


def _class_scores(refs: Sequence[np.ndarray]) -> bool:
    """Outputs shaped like class scores: rank 2, ``[batch, classes]`` with >= 10 classes."""
    return all(np.ndim(x) == 2 and np.shape(x)[1] >= 10 for x in refs)


@dataclass(frozen=True)
class Signal:
    """A reason a variant is not faster, with the evidence and the fix."""

    variant: str
    signal: str
    evidence: str
    fix: str


@dataclass(frozen=True)
class VariantRow:
    variant: str
    path: str
    file_bytes: int
    size_ratio: float
    p50_ms: float
    p90_ms: float
    ratio: float
    """Paired time ratio variant / fp32 (per-round medians, interleaved); < 1 is faster."""
    low: float
    high: float
    verdict: str
    errors: dict[str, dict[str, float | str]]
    """Per output name: max_abs, mean_abs, cosine, sqnr_db (and top1/top5 agreement for class
    scores; ``degenerate`` when cosine/SQNR cannot be scored, with the reason)."""
    kernels: dict[str, int]
    """Op types that executed (profiler), with node counts."""
    quantized_kernels: dict[str, int]
    steps: list[str]
    synthetic: bool
    error: str = ""
    """Why the variant could not be timed or run (its other figures are NaN), else ''."""


@dataclass(frozen=True)
class CompareResult(Result):
    model: str
    config: dict[str, Any]
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

    def to_pandas(self) -> Any:
        """variant, file_mb, size_ratio, p50_ms, p90_ms, ratio (to fp32), ci_low, ci_high,
        verdict, cosine, sqnr_db, max_abs, top1 (first output), quantized kernels, synthetic."""
        import pandas as pd

        rows = []
        for r in self.rows:
            first = next(iter(r.errors.values()), {})
            rows.append(
                {
                    "variant": r.variant,
                    "file_mb": r.file_bytes / 1e6,
                    "size_ratio": r.size_ratio,
                    "p50_ms": r.p50_ms,
                    "p90_ms": r.p90_ms,
                    "ratio": r.ratio,
                    "ci_low": r.low,
                    "ci_high": r.high,
                    "verdict": r.verdict,
                    "cosine": first.get("cosine"),
                    "sqnr_db": first.get("sqnr_db"),
                    "max_abs": first.get("max_abs"),
                    "top1": first.get("top1_agreement"),
                    "quantized_kernels": ", ".join(
                        f"{k}×{v}" for k, v in r.quantized_kernels.items()
                    ),
                    "synthetic": r.synthetic,
                }
            )
        return pd.DataFrame(rows)

    def plot(self) -> Any:
        from ortlab.plots import compare_figure

        return compare_figure(self)

    def __repr__(self) -> str:
        parts = [
            f"{r.variant} {r.ratio:.2f}x time, {r.size_ratio:.2f}x size" for r in self.rows[1:]
        ]
        mark = " (accuracy from SYNTHETIC inputs)" if self.synthetic else ""
        return f"<CompareResult {self.model!r}: " + "; ".join(parts) + f"{mark}>"

    def to_text(self) -> str:
        from ortlab.render import compare_text

        return str(compare_text(self))

    def _repr_html_(self) -> str:
        from ortlab.render import compare_html

        return str(compare_html(self))


def compare(
    model: Any,
    variants: Sequence[Any],
    config: SessionConfig | Mapping[str, Any] | None = None,
    feeds: Mapping[str, Any] | None = None,
    *,
    eval_data: Any = None,
    rounds: int = 8,
    runs: int = 10,
    dims: Mapping[str, int] | None = None,
    progress: Any = False,
    timeout: float | None = None,
) -> CompareResult:
    """Time ``model`` and its ``variants`` interleaved, and measure each variant's output error.

    Accuracy is measured at the shapes that are timed: without ``eval_data``, samples are
    synthesized at the shapes of ``feeds`` (or ``dims``). A variant whose session cannot be
    built or run gets a row saying so; the others are still compared."""
    from ortlab.engine import check_report, default_timeout, prepare
    from ortlab.quantization import calibration_data

    base, cfg, f = prepare(model, config, feeds, dims)
    models = [base] + [load(v) for v in variants]
    labels = ["fp32"] + [getattr(v.variant, "label", None) or v.name for v in models[1:]]
    run = _Runner(cfg, f, f"of {base.name!r} variants with {cfg.label()}",
                  timeout if timeout is not None else default_timeout())  # fmt: skip
    timed = run.call("interleaved", progress, rounds=rounds, runs=runs,
                     items=[(str(m.path), m.name, cfg) for m in models])  # fmt: skip
    check_report(timed["reports"][0], cfg, base)
    failed: dict[int, str] = dict(timed.get("failed", {}))
    evald = calibration_data(base, eval_data, limit=8, seed=100, like=f)
    outputs: dict[int, list[dict[str, np.ndarray]]] = {}
    profiles: dict[int, Any] = {}
    for k, m in enumerate(models):
        if k in failed:
            continue
        try:
            outputs[k] = run.model_call("outputs_many", m, samples=evald.samples)
            profiles[k] = run.model_call("profile", m, feeds=dict(f), runs=3, warmup=1)["data"]
        except OrtlabError as err:
            if k == 0:
                raise
            failed[k] = error_text(err)
    live = [k for k in range(len(models)) if k not in failed]
    medians = np.asarray(timed["medians_ns"], dtype=np.float64)[:, live] / 1e6
    verdicts = dict(zip(live, against_first(medians, [labels[k] for k in live]), strict=True))
    rows = [
        _failed_variant(m, labels[k], base, failed[k], evald.synthetic)
        if k in failed
        else _row(
            k,
            m,
            labels[k],
            base=base,
            verdict=verdicts[k],
            lat=timed["latencies_ns"][k],
            outputs=[outputs[0], outputs[k]],
            data=profiles[k],
            synthetic=evald.synthetic,
            against=1,
        )
        for k, m in enumerate(models)
    ]
    flags = cpu_flags()
    notes = [f"accuracy measured on {evald.source}", f"timed with {f.shapes_text()}"]
    notes += _reference_notes(rows[0])
    return CompareResult(
        model=base.name,
        config=cfg.to_dict(),
        rows=rows,
        signals=_signals(
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


@dataclass
class _Runner:
    """The worker calls of one comparison: same config, context and timeout."""

    cfg: SessionConfig
    feeds: Any
    context: str
    timeout: float | None

    def call(self, task: str, progress: Any, **kwargs: Any) -> Any:
        from ortlab.engine import call

        return call(task, {"feeds": dict(self.feeds), **kwargs}, desc="compare",
                    context=self.context, progress=progress, timeout=self.timeout)  # fmt: skip

    def model_call(self, task: str, m: Model, **kwargs: Any) -> Any:
        from ortlab.engine import call

        args = {"model_path": str(m.path), "model_name": m.name, "config": self.cfg, **kwargs}
        return call(task, args, desc=task, context=self.context, progress=False,
                    timeout=self.timeout)  # fmt: skip


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
        variant=label, path=str(m.path), file_bytes=m.path.stat().st_size,
        size_ratio=m.path.stat().st_size / max(base.path.stat().st_size, 1),
        p50_ms=nan, p90_ms=nan, ratio=nan, low=nan, high=nan, verdict=f"failed: {why}",
        errors={}, kernels={}, quantized_kernels={},
        steps=list(m.variant.steps) if getattr(m, "variant", None) else [],
        synthetic=synthetic, error=why,
    )  # fmt: skip


def _row(
    k: int,
    m: Model,
    label: str,
    *,
    base: Model,
    verdict: tuple[Verdict, str],
    lat: list[int],
    outputs: list[list[dict[str, np.ndarray]]],
    data: Any,
    synthetic: bool,
    against: int | None = None,
) -> VariantRow:
    """One variant's row; ``outputs[0]`` is the reference, ``outputs[against]`` (default
    ``outputs[k]``) the variant's outputs on the same samples."""
    v, text = verdict
    stats = latency_stats(lat)
    mine = outputs[k if against is None else against]
    errors = {
        name: error_metrics([o[name] for o in outputs[0]], [o[name] for o in mine])
        for name in outputs[0][0]
        if np.asarray(outputs[0][0][name]).dtype.kind == "f"
    }
    runs = max(len(data.run_us), 1)
    kernels = Counter(data.op_type[i] for i in data.ev_node)
    kernels = Counter({op: n // runs for op, n in kernels.items()})
    info = getattr(m, "variant", None)
    return VariantRow(
        variant=label,
        path=str(m.path),
        file_bytes=m.path.stat().st_size,
        size_ratio=m.path.stat().st_size / max(base.path.stat().st_size, 1),
        p50_ms=stats.p50_ms,
        p90_ms=stats.p90_ms,
        ratio=v.ratio,
        low=v.low,
        high=v.high,
        verdict=text,
        errors=errors,
        kernels=dict(kernels.most_common()),
        quantized_kernels={op: n for op, n in kernels.most_common() if op in QUANTIZED_OPS},
        steps=list(info.steps) if info else [],
        synthetic=synthetic,
    )


def _signals(
    models: list[Model],
    rows: list[VariantRow],
    profiles: list[Any],
    cfg: SessionConfig,
    flags: list[str],
) -> list[Signal]:
    out: list[Signal] = []
    base_data = profiles[0]
    total = sum(base_data.ev_dur_us) or 1.0
    conv_share = (
        sum(
            d
            for i, d in zip(base_data.ev_node, base_data.ev_dur_us, strict=True)
            if base_data.op_type[i] == "Conv"
        )
        / total
    )
    vnni = {"avx512_vnni", "avx_vnni", "amx_int8"} & set(flags)
    for m, row, data in zip(models[1:], rows[1:], profiles[1:], strict=True):
        info = getattr(m, "variant", None)
        mode = info.settings.get("mode") if info else ""
        dq = row.kernels.get("DequantizeLinear", 0) + row.kernels.get("QuantizeLinear", 0)
        dq -= _io_qdq(m)  # quantizing the inputs and dequantizing the outputs is unavoidable
        faster = row.high < 1 - NOISE_BAND  # significantly faster (NaN: no verdict)
        if mode == "static" and dq > 0 and not faster:
            out.append(
                Signal(
                    row.variant,
                    "QDQ pairs left unfused",
                    f"{dq} QuantizeLinear/DequantizeLinear kernels ran per inference inside the "
                    "graph (besides those at its inputs and outputs)",
                    "run ORT pre-processing (quant_pre_process) before quantizing; "
                    "keep the level at 'extended' or 'all' so QDQ fuses into QLinear "
                    "kernels",
                )
            )
        first = cfg.providers[0] if cfg.providers != "auto" else ""
        moved = {
            data.provider[i]
            for i in set(data.ev_node)
            if data.op_type[i] in QUANTIZED_OPS and data.provider[i] != first
        }
        if first and moved and first != "CPUExecutionProvider":
            out.append(
                Signal(
                    row.variant,
                    "quantized ops on another EP",
                    f"quantized kernels ran on {sorted(moved)}, not {first}",
                    f"check {first}'s int8 support, or quantize for the EP you run on",
                )
            )
        if mode == "dynamic" and conv_share > 0.5:
            out.append(_dynamic_conv_signal(row, conv_share))
        if rows[0].p50_ms < 1.0 and row.ratio > 1.0:
            out.append(
                Signal(
                    row.variant,
                    "model too small for quantization to pay",
                    f"fp32 runs in {rows[0].p50_ms:.3f} ms; the variant is "
                    f"{row.ratio:.2f}x the time: quantize/dequantize overhead dominates",
                    "keep fp32 for tiny models; quantize larger layers only",
                )
            )
        if mode in ("static", "dynamic") and not vnni:
            out.append(
                Signal(
                    row.variant,
                    "no VNNI on this CPU",
                    f"CPU flags: {', '.join(flags) or 'unknown'}; int8 dot products "
                    "need AVX512-VNNI/AVX-VNNI/AMX to beat fp32",
                    "run int8 on a CPU with VNNI, or stay in fp32",
                )
            )
        if mode == "fp16" and "CPUExecutionProvider" in {data.provider[i] for i in data.ev_node}:
            signal = _fp16_cpu_signal(row, data)
            if signal:
                out.append(signal)
    return out


def _io_qdq(m: Model) -> int:
    """QuantizeLinear nodes reading a graph input plus DequantizeLinear nodes writing a graph
    output: the Q/DQ kernels every QDQ model runs, fused or not."""
    g = m.proto.graph
    inputs, outputs = {i.name for i in g.input}, {o.name for o in g.output}
    return sum(1 for n in g.node if n.op_type == "QuantizeLinear" and n.input[0] in inputs) + sum(
        1 for n in g.node if n.op_type == "DequantizeLinear" and set(n.output) & outputs
    )


def _dynamic_conv_signal(row: VariantRow, conv_share: float) -> Signal:
    conv_int = row.kernels.get("ConvInteger", 0)
    if conv_int:
        evidence = (
            f"Conv is {conv_share:.0%} of fp32 node time and {conv_int} convolutions ran as "
            "ConvInteger with DynamicQuantizeLinear before each: ORT has no fast int8 "
            "convolution for dynamic quantization, and activations are re-quantized per run"
        )
    else:
        evidence = (
            f"Conv is {conv_share:.0%} of fp32 node time and dynamic quantization left the "
            "convolutions in float (only MatMul/Gemm were quantized)"
        )
    return Signal(
        row.variant,
        "conv-heavy model quantized dynamically",
        evidence,
        "use static quantization (QDQ, per-channel) for CNNs",
    )


def _fp16_cpu_signal(row: VariantRow, data: Any) -> Signal | None:
    """fp16 on the CPU EP: how many executed kernels really took float16 inputs."""
    executed = set(data.ev_node)
    half = sum(1 for i in executed if any(t == "float16" for t, _ in data.input_types[i]))
    if half > len(executed) / 2:
        return None
    casts = row.kernels.get("Cast", 0)
    return Signal(
        row.variant,
        "fp16 on the CPU EP",
        f"only {half} of {len(executed)} executed kernels took float16 inputs and {casts} Cast "
        "kernels ran: the CPU EP computes most of this model in float32",
        "use fp16 with a GPU EP (CUDA/TensorRT/DirectML); on CPU prefer int8",
    )
