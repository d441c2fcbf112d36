"""The doctor's rules: pure functions from what was observed and measured to findings.

Each rule reads :class:`~ortlab.diagnosis.facts.Facts` (the session report, the model's op
counts, the profile, the placement, and the interleaved measurements the doctor took) and
returns findings with the evidence, the fix, the code to apply it and, where the fix is a
setting or a model transform, the measured gain. Rules never run anything themselves, so each
one is tested on facts built from a model made to show its problem, and on a healthy model
where it stays quiet.
"""

from __future__ import annotations

from collections.abc import Callable

from ortlab.core.eps import MEMCPY_OPS, label
from ortlab.core.onnx_util import CONTROL_FLOW
from ortlab.core.units import fmt_ms
from ortlab.diagnosis.counted import Counted, counted, measured_gain
from ortlab.diagnosis.facts import (
    ATTENTION_OPS,
    FUSED_TRANSFORMER_OPS,
    SMALL_MODEL_MS,
    CandidateKey,
    Facts,
    Finding,
    FixTried,
    Kind,
    candidate_key,
    load_caveat,
    ran_op_types,
)
from ortlab.diagnosis.rules_decoder import decoder_phases, decoder_trials
from ortlab.diagnosis.rules_physics import machine_limits
from ortlab.diagnosis.rules_resources import (
    config_args,
    idle_spin,
    memory,
    memory_growth,
    npu_partition,
)

__all__ = ["RULES", "run_rules"]

# ---------------------------------------------------------------------- rules


def ep_fallback(f: Facts) -> list[Finding]:
    out = []
    for issue in f.seen.report.missing:
        loaded = [label(p) for p in f.seen.report.active]
        out.append(
            Finding(
                rule="ep_fallback",
                title=f"{label(issue.provider)} did not load: the model runs on {loaded}",
                evidence=f"requested {[label(p) for p in f.seen.report.requested]}; "
                + (
                    issue.reason
                    if issue.reason.startswith("ORT said")
                    else f"ORT said: {issue.reason}"
                ),
                fix=f"install what {label(issue.provider)} needs (ORT's message names the "
                "library), or drop it from providers so the fallback is not silent; "
                "fallback='error' makes ortlab refuse such sessions",
                code=f"SessionConfig(providers={loaded!r}, fallback='error')",
                gain=f"not measurable here: {label(issue.provider)} did not load on this machine",
                severity="error",
            )
        )
    return out


def ep_islands(f: Facts) -> list[Finding]:
    pl = f.seen.placement
    if pl is None:
        return []
    parts = pl.partition_rows
    accel = [p for p in parts if p.provider != "CPUExecutionProvider"]
    cpu = [p for p in parts if p.provider == "CPUExecutionProvider"]
    memcpy = [r for r in pl.optimized_rows if r.op_type in MEMCPY_OPS]
    if not accel or (not cpu and not memcpy):
        return []
    cpu_nodes = [n.node for n in pl.node_rows if n.provider == "CPUExecutionProvider"]
    cpu_ops = sorted({n.op_type for n in pl.node_rows if n.provider == "CPUExecutionProvider"})
    crossing = sum(b.bytes for b in pl.boundary_rows)
    memcpy_us = sum(r.us_per_run for r in memcpy)
    cpu_us = sum(r.us_per_run for r in pl.optimized_rows if r.provider == "CPUExecutionProvider")
    ep = label(accel[0].provider)
    cpu_only = counted(f.measured, Kind.CPU_ONLY.value)
    evidence = (
        f"{len(accel)} {ep} partition(s) and {len(cpu)} CPU island(s) "
        f"({len(cpu_nodes)} nodes: {', '.join(cpu_ops[:8])}); {len(pl.boundary_rows)} tensors "
        f"cross between EPs ({crossing:,} bytes per run); {len(memcpy)} Memcpy nodes "
        f"({memcpy_us:.0f} µs per run); CPU islands take {cpu_us:.0f} µs per run"
    )
    why = pl.reasons()
    if len(why):
        evidence += "; why, in ORT's or the EP's words: " + "; ".join(
            f"{r.reason} ({r.nodes} node{'' if r.nodes == 1 else 's'}, e.g. "
            f"{r.examples.split(', ')[0]})"
            for r in why.head(4).itertuples()
        )
        fixes = [f"{r.reason}: {r.fix}" for r in why.head(4).itertuples() if r.fix]
        fix = "; ".join(fixes) + (
            "; session.disable_cpu_ep_fallback=1 makes ORT fail instead of falling back, so "
            "you find them all"
        )
    else:
        fix = (
            f"ORT gave no reason for these op types ({', '.join(cpu_ops[:8])}): check {ep}'s "
            "supported-op list; session.disable_cpu_ep_fallback=1 makes ORT fail instead of "
            "falling back, so you find them all"
        )
    gain = cpu_only.gain(f.baseline_ms) if cpu_only is not None else {"gain": "not measured"}
    if cpu_only is not None:
        gain["gain"] = "the same model on the CPU EP alone: " + cpu_only.verdict()
    return [
        Finding(
            rule="ep_islands",
            title=f"{ep} hands {len(cpu_nodes)} nodes back to the CPU",
            evidence=evidence,
            fix=fix,
            code="SessionConfig(providers=[...], config_entries={'session.disable_cpu_ep_fallback'"
            ": '1'})",
            severity="warning",
            nodes=cpu_nodes[:200],
            **gain,
        )
    ]


def optimization_level(f: Facts) -> list[Finding]:
    if f.seen.requested.level in ("extended", "layout", "all"):
        return []
    return [
        Finding(
            rule="optimization_level",
            title=f"graph optimization level is '{f.seen.requested.level}'",
            evidence=f"the session was built with GraphOptimizationLevel "
            f"'{f.seen.requested.level}': constant folding, fusions (Conv+BN, Gelu, attention, "
            "LayerNorm) and layout changes beyond it are off",
            fix="build the session with level 'all' (ORT_ENABLE_ALL), or 'extended' for "
            "portable saved models",
            code="SessionConfig(level='all')  # sess_options.graph_optimization_level = "
            "ort.GraphOptimizationLevel.ORT_ENABLE_ALL",
            **measured_gain(f.measured, candidate_key(Kind.LEVEL, "all"), f.baseline_ms),
        )
    ]


def attention_shaped(ops: dict[str, int]) -> bool:
    return ops.get("Softmax", 0) >= 1 and ops.get("MatMul", 0) >= 4


def unfused_transformer(f: Facts) -> list[Finding]:
    """Attention-shaped, and neither the model nor what ORT ran (the baseline's profile or
    placement of the optimized graph) has a fused attention: ORT's session-time fusions may
    still have fused SkipLayerNormalization or BiasGelu, and the evidence says so."""
    ops = f.seen.op_counts
    ran = ran_op_types(f.seen)
    if not attention_shaped(ops) or FUSED_TRANSFORMER_OPS & set(ops) or ATTENTION_OPS & ran:
        return []
    fused = ", ".join(f"{n} {k}" for k, n in f.transformer_fused.items() if n) or "nothing"
    at_session = sorted(FUSED_TRANSFORMER_OPS & ran)
    if at_session:
        ran_text = (
            f"ORT fused {', '.join(at_session)} at session time (they ran in the "
            "baseline's profile) but no Attention: its session-time fusions do not "
            "cover this attention pattern"
        )
    else:
        ran_text = (
            "no fused Attention/SkipLayerNormalization"
            + (" ran in the baseline's profile" if ran else "")
            + ": ORT's session-time fusions do not cover these patterns"
        )
    evidence = (
        f"{ops.get('MatMul', 0)} MatMul, {ops.get('Softmax', 0)} Softmax and "
        f"{ops.get('LayerNormalization', 0) + ops.get('ReduceMean', 0)} LayerNorm/ReduceMean "
        f"nodes in the model and {ran_text}"
        # the optimizer is not run on a model whose network sits in If/Loop bodies
        + ("" if f.seen.compute_in_bodies else f"; the transformers optimizer fused {fused}")
    )
    fix = "run ORT's transformers optimizer (ortlab.transformer_optimize) and serve its model"
    code = (
        "opt = ortlab.transformer_optimize(model)  # then load opt.path\n"
        "# plain: from onnxruntime.transformers import optimizer; "
        "optimizer.optimize_model(path, model_type='bert').save_model_to_file(out)"
    )
    if f.seen.compute_in_bodies:  # a merged decoder: the optimizer cannot rewrite its If
        fix = (
            f"its network sits in If/Loop bodies ({f.seen.compute_in_bodies} MatMul/Gemm "
            "nodes: an optimum merged decoder), which ORT's transformers optimizer does not "
            "rewrite: export the decoder without the merge (optimum-onnx's "
            "text-generation-with-past export writes one model.onnx with past inputs and no "
            "If), or with onnxruntime-genai's builder, which fuses GroupQueryAttention, to "
            "fuse attention"
        )
        code = (
            "# optimum-cli export onnx --model <model> --task text-generation-with-past <dir>"
            "  # one model.onnx, no If: then ortlab.transformer_optimize it"
        )
    elif f.attention_reason:
        fix += f"; attention did not fuse because {f.attention_reason}"
    return [
        Finding(
            rule="unfused_transformer",
            title="attention is not fused" if at_session else "transformer blocks are not fused",
            evidence=evidence,
            fix=fix,
            code=code,
            **measured_gain(f.measured, candidate_key(Kind.VARIANT, "transformers"), f.baseline_ms),
        )
    ]


def initializer_inputs(f: Facts) -> list[Finding]:
    if not f.seen.initializer_blocker:
        return []
    key = candidate_key(Kind.VARIANT, "no-initializer-inputs")
    return [
        Finding(
            rule="initializer_inputs",
            title="initializers are listed as graph inputs",
            evidence=f.seen.initializer_blocker,
            fix="remove the initializers from the graph inputs (export with "
            "keep_initializers_as_inputs=False), so ORT may constant-fold and fuse them",
            code="fixed = ortlab.without_initializer_inputs(model)",
            **measured_gain(f.measured, key, f.baseline_ms),
        )
    ]


def thread_settings(f: Facts) -> list[Finding]:
    """Too many threads for the cores; the sweep setting whose gain holds (:func:`counted`),
    or the screen's fastest, saying it did not hold or was not re-measured."""
    sweep = [
        m for k, m in f.measured.items() if CandidateKey.parse(k).is_sweep and m.stage != "final"
    ]
    if not sweep:
        return []
    curve = "; ".join(
        f"{m.label.split(' · ')[-1]}: {fmt_ms(m.p50_ms)} ({m.paired.ratio:.2f}x)" for m in sweep
    )
    req = f.seen.requested.intra_op_threads
    caveat = load_caveat(f)
    under_load = f"; {caveat}" if caveat else ""
    out = []
    if req > f.seen.cores:
        out.append(
            Finding(
                rule="threads",
                title=f"intra_op_threads={req} is more than the {f.seen.cores} physical cores",
                evidence=f"threads contend for cores; measured curve: {curve}{under_load}",
                fix="use at most one intra-op thread per physical core (0 lets ORT choose)",
                code=f"SessionConfig(intra_op_threads={f.seen.cores})",
                gain="see the thread curve",
            )
        )
    found = [c for m in sweep if (c := counted(f.measured, m.key)) is not None]
    held = [c for c in found if c.holds]
    screened = min(sweep, key=lambda m: m.paired.ratio)
    if not held and not screened.faster:
        return out
    best = (
        min(held, key=lambda c: c.row.paired.ratio) if held else counted(f.measured, screened.key)
    )
    assert best is not None
    m = best.screen or best.row
    setting = m.label.split(" · ")[-1]
    title = (
        f"{setting} is faster than the thread settings asked for"
        if best.holds
        else f"{setting}: {best.word()}"
    )
    out.append(
        Finding(
            rule="threads",
            title=title + (" (measured under load)" if caveat else ""),
            evidence=f"a sweep of intra-op threads and spinning, each timed interleaved "
            f"with the baseline: {curve}{under_load}",
            fix=f"build the session with {setting}; on a shared machine also consider "
            "allow_spinning=False, which frees cores between runs"
            if best.holds
            else f"keep the thread settings asked for: {setting} is not a verified gain",
            code=f"SessionConfig({config_args(m.config, f.seen.requested)})",
            severity="warning" if best.holds else "info",
            **best.gain(f.baseline_ms),
        )
    )
    return out


def _best_fix(f: Facts, tried: FixTried) -> Counted | None:
    """The fix of an int8 variant to propose: the fastest that reaches ``min_cosine``, else
    the most accurate (each as :func:`counted` has it)."""
    fixes = [c for k in tried.variants if (c := counted(f.measured, k)) is not None]
    if not fixes:
        return None
    good = [c for c in fixes if c.row.cosine >= f.seen.min_cosine]
    if good:
        return min(good, key=lambda c: c.row.paired.ratio)
    return max(fixes, key=lambda c: c.row.cosine)


def quantization(f: Facts) -> list[Finding]:
    out = []
    fix_keys = {k for tried in f.quant_fixes.values() for k in tried.variants}
    for key in f.measured:
        # what counts for the variant (its re-measurement with the baseline when there is
        # one) is what the finding says, as the best does: never "undecided" beside "faster"
        c = CandidateKey.parse(key)
        if not c.is_variant or not c.arg.startswith("quant-") or c.final or key in fix_keys:
            continue
        said = counted(f.measured, key)
        assert said is not None
        m = said.row
        if m.slower:
            continue
        kind = c.arg.removeprefix("quant-")
        why = {
            "dynamic": "MatMul/Gemm carry most of the time, and dynamic quantization needs no "
            "calibration",
            "int4": "MatMul carries most of the time; weight-only int4 (MatMulNBits) stores its "
            "weights in 4 bits, activations stay float",
        }.get(kind, "Conv carries most of the time; static QDQ per-channel keeps int8 end to end")
        accurate = m.cosine >= f.seen.min_cosine
        cost = f"output cosine {m.cosine:.4f} against fp32 on the evaluation samples" + (
            ""
            if accurate
            else f" — below {f.seen.min_cosine}, so the doctor did not pick it as best"
        )
        static = "mode='static', format='qdq', per_channel=True, calibration=samples"
        args = f"mode={kind!r}" if kind in ("dynamic", "int4") else static
        code = f"q = ortlab.quantize(model, {args})"
        fix = (
            f"serve the {m.variant} model if its accuracy on real data is acceptable "
            "(calibrate static quantization with real samples)"
        )
        gain = said.gain(f.baseline_ms)
        title = f"{m.variant}: {said.word()}, accuracy cost shown"
        tried = f.quant_fixes.get(key)
        best = _best_fix(f, tried) if tried is not None and not accurate else None
        nodes = tried.nodes if tried is not None else []
        if tried is not None and best is not None:
            how = tried.variants[best.key]
            cost += (
                f"; with its {len(nodes)} worst nodes ({', '.join(nodes[:5])}) {how}: "
                f"cosine {best.row.cosine:.4f}, {best.verdict()}, size "
                f"{best.row.file_bytes:,} bytes"
            )
            reaches = best.row.cosine >= f.seen.min_cosine
            fix = f"serve {best.row.variant}: it spares the nodes where int8 loses the most" + (
                ""
                if reaches
                else f", though its cosine is still below {f.seen.min_cosine}: "
                "spare more nodes (fix(n=…)) or calibrate with real samples"
            )
            code += (
                f"\nfix = ortlab.quantization_error(model, q).fix(n={len(nodes)})\n"
                "ortlab.compare(model, [q, *fix.variants])  # the Pareto chart"
            )
            gain = best.gain(f.baseline_ms)  # the gain quoted is the fix's: the title says so
            title += f"; the fix ({best.row.variant}): {best.word()}"
        elif key in f.quant_fixes:
            cost += "; sparing its worst nodes could not be measured (see the notes)"
        out.append(
            Finding(
                rule="quantization",
                title=title,
                evidence=f"{why}; size {m.file_bytes:,} bytes; {cost}",
                fix=fix,
                code=code,
                severity="warning" if said.holds else "info",
                nodes=list(nodes),
                **gain,
            )
        )
    return out


def slow_variant(f: Facts) -> list[Finding]:
    out = []
    for key in f.measured:
        c = CandidateKey.parse(key)
        said = counted(f.measured, key)
        if not c.is_variant or c.final or said is None or not said.row.slower:
            continue
        m = said.row
        reasons = [s for s in f.variant_signals if s.variant == m.variant]
        why = "; ".join(f"{s.signal}: {s.evidence}" for s in reasons) or (
            "no known cause found in its kernels; profile both (ortlab.profile) and compare"
        )
        fixes = "; ".join(dict.fromkeys(s.fix for s in reasons)) or "keep the faster model"
        gain = said.gain(f.baseline_ms)
        gain["saved_ms"] = max(m.p50_ms - f.baseline_ms, 0.0)
        out.append(
            Finding(
                rule="slow_variant",
                title=f"{m.variant} is slower than the original",
                evidence=why,
                fix=fixes,
                code="ortlab.compare(model, [variant])  # kernels, error and timing side by side",
                **gain,
            )
        )
    return out


def io_binding(f: Facts) -> list[Finding]:
    said = counted(f.measured, Kind.IOBINDING.value)
    if said is None or not said.holds or f.seen.requested.io_binding:
        return []  # a gain that did not hold: the thread and level findings say the rest
    return [
        Finding(
            rule="io_binding",
            title="IO binding saves per-run copies on this small model",
            evidence=f"the model runs in {fmt_ms(f.baseline_ms)}, so binding inputs and outputs "
            "once (no per-run allocation and copy) is a visible share",
            fix="run with IOBinding: bind inputs (on the EP's device) and outputs once",
            code="b = sess.io_binding(); b.bind_cpu_input(name, x); b.bind_output(out); "
            "sess.run_with_iobinding(b)",
            **said.gain(f.baseline_ms),
        )
    ]


def _wants(f: Facts, *eps: str) -> bool:
    req = f.seen.requested.providers
    return req != "auto" and any(e in req for e in eps)


def trt_dynamic_shapes(f: Facts) -> list[Finding]:
    trt = ("TensorrtExecutionProvider", "NvTensorRTRTXExecutionProvider")
    if not _wants(f, *trt) or not f.seen.symbolic_inputs:
        return []
    dims = "; ".join(f"{k}: {', '.join(v)}" for k, v in f.seen.symbolic_inputs.items())
    shapes = ",".join(f"{k}:1x..." for k in f.seen.symbolic_inputs)
    loaded = any(p in f.seen.report.active for p in trt)
    return [
        Finding(
            rule="trt_dynamic_shapes",
            title="dynamic input shapes with TensorRT: engines rebuild per new shape",
            evidence=f"symbolic dims {dims}; without optimization profiles TensorRT builds a "
            "new engine whenever an input shape is outside the ones it has seen",
            fix="give TensorRT explicit shape ranges (trt_profile_min_shapes/max/opt) and an "
            "engine cache (trt_engine_cache_enable), or fix the dims",
            code="providers=[('TensorrtExecutionProvider', {'trt_profile_min_shapes': "
            f"'{shapes}', 'trt_profile_max_shapes': '...', 'trt_profile_opt_shapes': '...', "
            "'trt_engine_cache_enable': True})]",
            gain="measured" if loaded else "not measurable here: TensorRT did not load",
        )
    ]


def cuda_graph(f: Facts) -> list[Finding]:
    if not _wants(f, "CUDAExecutionProvider"):
        return []
    if CONTROL_FLOW & set(f.seen.op_counts) or f.seen.symbolic_inputs:
        return []
    said = counted(f.measured, Kind.CUDA_GRAPH.value)
    loaded = "CUDAExecutionProvider" in f.seen.report.active
    gain = (
        said.gain(f.baseline_ms)
        if said
        else {"gain": "not measured" if loaded else "not measurable here: CUDA did not load"}
    )
    return [
        Finding(
            rule="cuda_graph",
            title="eligible for CUDA graphs",
            evidence="static input shapes and no If/Loop/Scan: the whole run can be captured "
            "once and replayed, removing per-kernel launch overhead",
            fix="enable_cuda_graph=1 in the CUDA EP options, with IO binding to fixed buffers",
            code="SessionConfig(providers=['cuda', 'cpu'], provider_options={'cuda': "
            "{'enable_cuda_graph': '1'}}, io_binding=True)",
            severity="info",
            **gain,
        )
    ]


def profiling_overhead(f: Facts) -> list[Finding]:
    if f.seen.profiled_ms is None or f.baseline_ms <= 0:
        return []
    factor = f.seen.profiled_ms / f.baseline_ms
    if factor < 1.25 or f.baseline_ms > SMALL_MODEL_MS * 5:
        return []
    return [
        Finding(
            rule="profiling_overhead",
            title=f"the profiler inflates this model's run time {factor:.1f}x",
            evidence=f"a run takes {fmt_ms(f.baseline_ms)} without the profiler and "
            f"{fmt_ms(f.seen.profiled_ms)} with it: per-node event recording dominates a model "
            "this small, so the profile's absolute times overstate every op",
            fix="read latency from ortlab.benchmark (profiler off); use the profile only for "
            "relative shares, or profile a larger batch",
            code="ortlab.benchmark(model, config)  # profiler off",
            gain=f"profiled/unprofiled time ratio {factor:.2f} (not a fix to apply)",
            severity="info",
        )
    ]


_FAILURE_FIX = {
    "memory": "the doctor could not measure the session's memory in a fresh process, so it "
    "gives no memory finding; run ortlab.footprint(model) alone to see the whole error",
    "build": "the doctor left this variant out and measured the others; run the step alone "
    "(code) to see the whole error — the tool failed on this model, not on your settings",
    "timing": "ORT could not build or run a session for this candidate, so the doctor left it "
    "out and measured the others; build it alone (code) to see ORT's whole error",
    "accuracy": "its outputs could not be computed, so its accuracy is unknown and the doctor "
    "left it out; run it alone (code) to see the whole error",
    "explain": "the doctor could not profile this variant, so it cannot say why it is slower; "
    "profile it alone (ortlab.profile) to see the whole error",
    "generation": "the doctor could not generate with it, so it has no generation figures "
    "(TTFT, decode tokens/s); what was timed on one decode step stands; run the generation "
    "alone (code) to see the whole error",
}


def candidate_failures(f: Facts) -> list[Finding]:
    out = []
    for x in f.failures:
        lines = [ln.strip() for ln in x.message.splitlines() if ln.strip()]
        first = lines[0][:200] if lines else "(no message)"
        out.append(
            Finding(
                rule="candidate_failed",
                title=f"{x.what} fails: {first}",
                evidence=x.message or "(no message)",
                fix=_FAILURE_FIX.get(x.stage, _FAILURE_FIX["build"]),
                code=x.code or "# the failing step is named in the title",
                gain="not measured: the candidate failed",
                severity="warning",
            )
        )
    return out


RULES: tuple[Callable[[Facts], list[Finding]], ...] = (
    ep_fallback,
    ep_islands,
    optimization_level,
    unfused_transformer,
    initializer_inputs,
    thread_settings,
    quantization,
    slow_variant,
    io_binding,
    trt_dynamic_shapes,
    cuda_graph,
    profiling_overhead,
    npu_partition,
    memory,
    memory_growth,
    idle_spin,
    candidate_failures,
    machine_limits,
    decoder_phases,
    decoder_trials,
)
_SEVERITY = {"error": 0, "warning": 1, "info": 2}


def run_rules(f: Facts) -> list[Finding]:
    """Every rule's findings: errors first, then by measured milliseconds saved per run."""
    findings = [x for rule in RULES for x in rule(f)]
    return sorted(findings, key=lambda x: (_SEVERITY[x.severity], -x.saved_ms))
