"""Model variants, one row each, and why a variant is not faster: the evidence-and-fix signals
read from the kernels that really ran (QDQ pairs left unfused, conv-heavy models quantized
dynamically, no VNNI, fp16 on the CPU EP…). One home for these judgements: ``compare`` shows
them, the doctor's slow-variant rule quotes them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ortlab.analysis.quantization.metrics import output_errors
from ortlab.analysis.quantization.quantize import QUANTIZED_OPS
from ortlab.core.config import SessionConfig
from ortlab.core.model import Model
from ortlab.core.run import Run
from ortlab.core.stats import NOISE_BAND, Paired, Verdict, latency_stats
from ortlab.core.units import fmt_ms

if TYPE_CHECKING:
    from ortlab.engine.trace import ProfileData

__all__ = ["Signal", "VariantRow", "explain_variant_run", "variant_row", "variant_signals"]


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
    """On disk, external data included (``Model.disk_bytes``)."""
    size_ratio: float
    p50_ms: float
    p90_ms: float
    paired: Paired
    """Paired time ratio variant / fp32 (per-round medians, interleaved; < 1 is faster) with
    its interval and verdict."""
    errors: dict[str, dict[str, float | str]]
    """Per output name: ``kind`` (float or labels); for float outputs max_abs, mean_abs,
    cosine, sqnr_db (and top1/top5 agreement for class scores; ``degenerate`` when cosine/SQNR
    cannot be scored, with the reason); for label outputs ``labels_equal``, the fraction of
    values exactly equal. Outputs that are not scored are named in ``scoring``."""
    kernels: dict[str, int]
    """Op types that executed (profiler), with node counts."""
    quantized_kernels: dict[str, int]
    steps: list[str]
    synthetic: bool
    error: str = ""
    """Why the variant could not be timed or run (its other figures are NaN), else ''."""
    scoring: list[str] = field(default_factory=list)
    """How outputs were scored where it is not plain: reshaped (ZipMap) or left out, and why."""

    def first_float(self) -> dict[str, float | str]:
        """The first float output's metrics ({} when no output is float)."""
        return next((e for e in self.errors.values() if e.get("kind", "float") == "float"), {})

    def labels_equal(self) -> float | None:
        """The lowest exact-agreement fraction over label outputs (None without any)."""
        got = [float(e["labels_equal"]) for e in self.errors.values() if "labels_equal" in e]
        return min(got) if got else None


def variant_row(
    k: int,
    m: Model,
    label: str,
    *,
    base: Model,
    verdict: tuple[Verdict, str],
    lat: list[int],
    outputs: list[list[dict[str, np.ndarray]]],
    data: ProfileData,
    synthetic: bool,
    against: int | None = None,
) -> VariantRow:
    """One variant's row; ``outputs[0]`` is the reference, ``outputs[against]`` (default
    ``outputs[k]``) the variant's outputs on the same samples."""
    v, text = verdict
    stats = latency_stats(lat)
    mine = outputs[k if against is None else against]
    errors, scoring = output_errors(outputs[0], mine)
    runs = max(len(data.run_us), 1)
    kernels = Counter(data.op_type[i] for i in data.ev_node)
    kernels = Counter({op: n // runs for op, n in kernels.items()})
    info = getattr(m, "variant", None)
    return VariantRow(
        variant=label,
        path=str(m.path),
        file_bytes=m.disk_bytes,
        size_ratio=m.disk_bytes / max(base.disk_bytes, 1),
        p50_ms=stats.p50_ms,
        p90_ms=stats.p90_ms,
        paired=Paired.of(v, text),
        errors=errors,
        kernels=dict(kernels.most_common()),
        quantized_kernels={op: n for op, n in kernels.most_common() if op in QUANTIZED_OPS},
        steps=list(info.steps) if info else [],
        synthetic=synthetic,
        scoring=scoring,
    )


def variant_signals(
    models: list[Model],
    rows: list[VariantRow],
    profiles: list[ProfileData],
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
        mode = info.config.mode if info else ""
        dq = row.kernels.get("DequantizeLinear", 0) + row.kernels.get("QuantizeLinear", 0)
        dq -= _io_qdq(m)  # quantizing the inputs and dequantizing the outputs is unavoidable
        faster = row.paired.high < 1 - NOISE_BAND  # significantly faster (NaN: no verdict)
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
        if rows[0].p50_ms < 1.0 and row.paired.ratio > 1.0:
            out.append(
                Signal(
                    row.variant,
                    "model too small for quantization to pay",
                    f"fp32 runs in {fmt_ms(rows[0].p50_ms)}; the variant is "
                    f"{row.paired.ratio:.2f}x the time: quantize/dequantize overhead dominates",
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


def _fp16_cpu_signal(row: VariantRow, data: ProfileData) -> Signal | None:
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


def explain_variant_run(
    base: Model,
    run: Run,
    *,
    verdict: tuple[Verdict, str],
    label: str,
    latencies: tuple[list[int], list[int]],
    outputs: tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]],
    base_profile: ProfileData,
    synthetic: bool,
) -> list[Signal]:
    """Why a slower variant (``run``'s model, with its config, at the inputs ``base`` was
    timed at) is slower than ``base``: the variant profiled (``run``'s runs) beside the base's
    profile, both as rows with their times and output error, then the signals
    (:func:`variant_signals`) those rows and profiles show."""
    from ortlab.analysis.profiling import profile_run
    from ortlab.core.machine import cpu_flags

    variant, config = run.model, run.config
    prof = profile_run(run)
    rows = [
        variant_row(
            k,
            model,
            name,
            base=base,
            verdict=verdict,
            lat=lat,
            outputs=[outputs[0], out],
            data=data,
            synthetic=synthetic,
        )
        for k, model, name, lat, out, data in (
            (0, base, "fp32", latencies[0], outputs[0], base_profile),
            (1, variant, label, latencies[1], outputs[1], prof.data),
        )
    ]
    return variant_signals([base, variant], rows, [base_profile, prof.data], config, cpu_flags())
