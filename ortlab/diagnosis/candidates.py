"""The doctor's candidates: the settings worth timing against the baseline and the model
variants worth building, each a :class:`~ortlab.diagnosis.facts.Candidate` with its key's one
spelling (:func:`~ortlab.diagnosis.facts.candidate_key`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ortlab.analysis.memory import memory_settings
from ortlab.analysis.optimizers.transformers import transformer_optimize
from ortlab.analysis.quantization.quantize import float16_weights, quantized_ops
from ortlab.analysis.quantization.quantize import quantize as make_quantized
from ortlab.core.config import LEVEL_ORDER, SessionConfig
from ortlab.core.machine import thread_counts
from ortlab.core.model import Model, load, without_initializer_inputs
from ortlab.core.onnx_util import compute_in_bodies
from ortlab.core.quantconfig import QuantConfig
from ortlab.core.runtime import TIMED_SPIN_US, timed_spin
from ortlab.diagnosis.facts import (
    ATTENTION_OPS,
    FUSED_TRANSFORMER_OPS,
    SMALL_MODEL_MS,
    Candidate,
    CandidateKey,
    Kind,
    Measured,
    Observed,
    TransformerFusion,
    candidate_key,
    ran_op_types,
)
from ortlab.diagnosis.rules import attention_shaped

if TYPE_CHECKING:
    from ortlab.analysis.memory import FootprintResult
    from ortlab.core.inputs import Feeds
    from ortlab.core.model import ModelLike
    from ortlab.diagnosis.budget import StageBudget

__all__ = [
    "applicable_quantization",
    "setting_candidates",
    "variant_candidates",
    "variant_config",
    "wanted_quantization",
    "winning_settings",
]


def setting_candidates(
    m: Model, cfg: SessionConfig, seen: Observed, footprint: FootprintResult | None = None
) -> list[Candidate]:
    """The baseline and the settings worth timing against it: higher optimization levels,
    intra-op threads (1, half the cores, the cores, the logical CPUs), spinning off, IO
    binding for small models, the CPU EP alone when part of the graph falls back to it, a CUDA
    graph where CUDA runs static shapes, and the memory settings that lower the peak (in
    ``footprint``, the memory stage's result)."""
    items: list[Candidate] = [Candidate("baseline", m, cfg, [])]
    for level in ("basic", "extended", "all"):
        if LEVEL_ORDER.index(level) > LEVEL_ORDER.index(cfg.level):
            items.append(Candidate(candidate_key(Kind.LEVEL, level), m, cfg.with_(level=level), []))
    for n in thread_counts(seen.cores):
        if n != cfg.intra_op_threads:
            items.append(
                Candidate(candidate_key(Kind.THREADS, str(n)), m, cfg.with_(intra_op_threads=n), [])
            )
    if cfg.allow_spinning is not False:
        items.append(
            Candidate(candidate_key(Kind.SPIN, "off"), m, cfg.with_(allow_spinning=False), [])
        )
    timed = timed_spin(cfg)
    if timed is not None:
        items.append(Candidate(candidate_key(Kind.SPIN, f"{TIMED_SPIN_US}us"), m, timed, []))
    if not cfg.io_binding and seen.profiled_ms < SMALL_MODEL_MS * 5:
        items.append(Candidate(Kind.IOBINDING.value, m, cfg.with_(io_binding=True), []))
    pl = seen.placement
    if pl is not None and any(p.provider == "CPUExecutionProvider" for p in pl.partition_rows):
        cpu = cfg.with_(providers=["cpu"], provider_options={})
        items.append(Candidate(Kind.CPU_ONLY.value, m, cpu, []))
    if "CUDAExecutionProvider" in seen.report.active and not seen.symbolic_inputs:
        opts = {**cfg.options_for("CUDAExecutionProvider"), "enable_cuda_graph": "1"}
        graph = cfg.with_(provider_options={"CUDAExecutionProvider": opts}, io_binding=True)
        items.append(Candidate(Kind.CUDA_GRAPH.value, m, graph, []))
    fp = footprint
    if fp is not None:
        settings = memory_settings(cfg)
        for row in fp.savings():
            key = candidate_key(Kind.MEMORY, row.setting)
            items.append(Candidate(key, m, settings[row.setting], []))
    return items


def variant_config(cfg: SessionConfig) -> SessionConfig:
    """Variants are timed at level 'all' when the requested level is lower, so their gain
    is the model change alone (compared with the original at that same level)."""
    if LEVEL_ORDER.index(cfg.level) < LEVEL_ORDER.index("extended"):
        return cfg.with_(level="all")
    return cfg


def variant_candidates(
    m: Model,
    seen: Observed,
    user_variants: Sequence[ModelLike],
    *,
    budget: StageBudget,
    feeds: Feeds,
    quantize: bool,
    transformers: bool,
) -> tuple[list[tuple[str, Model, list[str]]], TransformerFusion]:
    """The variants of ``m`` worth building, each built under ``budget``'s guard and limits:
    the initializer-input fix, the transformers optimizer for attention-shaped models, the
    quantizations the op-time shares call for (calibrated at ``feeds``' shapes), and the user's
    own variants; and what the transformers optimizer fused (or why it could not fuse
    attention). Why a wanted variant does not apply is the stage's note (not a candidate, so not
    a failure)."""

    out: list[tuple[str, Model, list[str]]] = []

    def attempt(what: str, build: Callable[[], tuple[str, Model, list[str]]], code: str) -> None:
        if budget.build_left() < 0:  # timing the candidates keeps the other half
            budget.skip(
                f"{what} (not built: building variants has half the budget; run it alone: {code})"
            )
            return
        built = budget.guarded(what, "build", build, code)
        if built is not None:
            out.append(built)

    if seen.initializer_blocker:
        attempt(
            "the initializer-input fix",
            lambda: (
                candidate_key(Kind.VARIANT, "no-initializer-inputs"),
                without_initializer_inputs(m),
                ["ortlab.without_initializer_inputs(model)"],
            ),
            "ortlab.without_initializer_inputs(model)",
        )
    ops = seen.op_counts
    fusion = TransformerFusion()
    fused_at_session = ATTENTION_OPS & ran_op_types(seen)  # ORT fused attention itself
    if (
        transformers
        and attention_shaped(ops)
        and not FUSED_TRANSFORMER_OPS & set(ops)
        and not fused_at_session
        and not compute_in_bodies(m.proto.graph)  # the optimizer rewrites the main graph only
    ):

        def optimized() -> tuple[str, Model, list[str]]:
            nonlocal fusion
            r = transformer_optimize(m, progress=False, timeout=budget.build_timeout())
            fusion = TransformerFusion(
                {k: v for k, v in r.fused_operators.items() if v}, r.reason or None
            )
            return (
                candidate_key(Kind.VARIANT, "transformers"),
                load(r.path, name=f"{m.name}-transformers"),
                [
                    f"ortlab.transformer_optimize(model)  # {r.model_type}, "
                    f"heads={r.num_heads}, hidden={r.hidden_size}"
                ],
            )

        attempt("the transformers optimizer", optimized, "ortlab.transformer_optimize(model)")
    wanted = wanted_quantization(seen.op_time_share, seen.op_counts) if quantize else []
    wanted, why = applicable_quantization(m, wanted)
    if why:  # not a candidate, so not a failure: one note says why none was tried
        budget.note(why)

    def quantized(kind: str, qc: QuantConfig) -> tuple[str, Model, list[str]]:
        # calibrated at the timed feeds' shapes (ortlab.quantize synthesizes samples like them)
        q = make_quantized(m, qc, feeds=feeds, timeout=budget.build_timeout())
        key = candidate_key(Kind.VARIANT, f"quant-{kind}")
        return key, q, list(q.variant.steps) if q.variant else []

    def given(v: ModelLike) -> tuple[str, Model, list[str]]:
        vm = load(v)
        key = candidate_key(Kind.VARIANT, vm.name)
        return key, vm, list(vm.variant.steps) if vm.variant else ["given"]

    for kind, qc in wanted:
        code = f"ortlab.quantize(model, {_quant_args(qc)})"
        attempt(qc.label(), functools.partial(quantized, kind, qc), code)
    for i, v in enumerate(user_variants):
        what = f"variant {i} ({_describe(v)})"
        attempt(what, functools.partial(given, v), f"ortlab.load({_describe(v)!r})")
    return out, fusion


def wanted_quantization(
    share: dict[str, float], ops: dict[str, int] | None = None
) -> list[tuple[str, QuantConfig]]:
    """Variants worth trying: static QDQ per-channel int8 when convolutions carry the time;
    dynamic int8 when MatMul/Gemm/attention do, and weight-only int4 (MatMulNBits) too when
    the model has MatMul nodes (their constant weights are what it quantizes)."""

    conv = sum(v for k, v in share.items() if "Conv" in k)
    matmul = sum(v for k, v in share.items() if "MatMul" in k or "Gemm" in k or "Attention" in k)
    wanted: list[tuple[str, QuantConfig]] = []
    if conv >= 0.4:
        qc = QuantConfig(mode="static", format="qdq", per_channel=True, calibration_size=16)
        wanted.append(("static", qc))
    if matmul >= 0.3:
        wanted.append(("dynamic", QuantConfig(mode="dynamic")))
        if ops and ops.get("MatMul"):
            wanted.append(("int4", QuantConfig(mode="int4")))
    return wanted


def applicable_quantization(
    m: Model, wanted: list[tuple[str, QuantConfig]]
) -> tuple[list[tuple[str, QuantConfig]], str]:
    """The quantizations in ``wanted`` that can apply to ``m``, and why the others cannot ('' when
    all can): none of an already quantized model (int8 or int4 ops: another pass is not a model
    ORT runs) or of float16 weights; int4 only with a MatMul whose weight is an initializer."""
    if not wanted:
        return wanted, ""
    kinds = ", ".join(k for k, _ in wanted)
    already = quantized_ops(m)
    if already:
        return [], (
            f"no quantized variant proposed ({kinds}): the model is already quantized "
            f"({', '.join(already)} present)"
        )
    half = float16_weights(m)
    if half:
        return [], (
            f"no quantized variant proposed ({kinds}): the model holds float16 weights "
            f"({half}); ORT's quantizer takes float32 models"
        )
    graph = m.proto.graph
    weights = {t.name for t in graph.initializer}
    if not any(
        n.op_type == "MatMul" and n.input[1:2] and n.input[1] in weights for n in graph.node
    ):
        out = [(k, qc) for k, qc in wanted if k != "int4"]
        if len(out) < len(wanted):
            return out, (
                "no int4 variant proposed: no MatMul has a constant weight for MatMulNBits to pack"
            )
    return wanted, ""


def winning_settings(ok: dict[str, Measured], cfg: SessionConfig) -> dict[str, object]:
    """The fastest promising setting of each dimension (level, threads, spinning, IO)."""
    changes: dict[str, object] = {}
    for kind in (Kind.LEVEL, Kind.THREADS, Kind.SPIN):
        group = [v for k, v in ok.items() if CandidateKey.parse(k).kind is kind]
        if group:
            best = min(group, key=lambda v: v.paired.ratio)
            for name in ("level", "intra_op_threads", "allow_spinning"):
                if getattr(best.config, name) != getattr(cfg, name):
                    changes[name] = getattr(best.config, name)
    if Kind.IOBINDING.value in ok:
        changes["io_binding"] = True
    return changes


def _quant_args(qc: QuantConfig) -> str:
    if qc.mode in ("dynamic", "int4"):
        return f"mode={qc.mode!r}"
    return f"mode='static', format={qc.format!r}, per_channel={qc.per_channel!r}"


def _describe(v: ModelLike) -> str:
    """A user variant in words: its name or file name."""
    if isinstance(v, Model):
        return v.name
    if isinstance(v, str | os.PathLike):
        return Path(os.fspath(v)).name
    return type(v).__name__
