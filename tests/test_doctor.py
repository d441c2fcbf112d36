"""The doctor: each rule fires on facts that show its problem and stays quiet on a healthy
session (facts built by hand: no timing is asserted), then a few real doctor runs in the worker
on models made to show a problem, the report, and the CLI."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from typing import Any

import pytest

import ortlab
from ortlab import rules
from ortlab.compare import Signal
from ortlab.config import SessionConfig
from ortlab.rules import Facts, Measured
from ortlab.session import ProviderIssue, SessionReport
from tests import models
from tests.test_placement import _replay

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
BERT_OPS = {"MatMul": 16, "Softmax": 2, "Add": 30, "LayerNormalization": 5, "Gelu": 2}
RESNET_OPS = {"Conv": 53, "Relu": 49, "Add": 16, "MaxPool": 1, "Gemm": 1}


def _report(
    requested: tuple[str, ...] = (CPU,),
    active: tuple[str, ...] = (CPU,),
    missing: tuple[tuple[str, str], ...] = (),
) -> SessionReport:
    return SessionReport(
        requested=list(requested),
        active=list(active),
        missing=[ProviderIssue(p, r) for p, r in missing],
        level="all",
        create_ms=1.0,
        ort_version="1.31.1",
    )


def _m(
    key: str,
    ratio: float,
    low: float,
    high: float,
    *,
    p50: float = 10.0,
    cosine: float = math.nan,
    variant: str = "original",
    config: SessionConfig | None = None,
) -> Measured:
    return Measured(
        key=key,
        label=f"cpu · all · {key}",
        variant=variant,
        model_path="m.onnx",
        config=(config or SessionConfig()).to_dict(),
        p50_ms=p50,
        ratio=ratio,
        low=low,
        high=high,
        significant=high < 0.98 or low > 1.02,
        verdict=f"verdict of {key}",
        cosine=cosine,
        file_bytes=1000,
        stage="screen",
    )


def _facts(**kw: Any) -> Facts:
    base: dict[str, Any] = {
        "model_name": "m",
        "requested": SessionConfig(),
        "report": _report(),
        "op_counts": dict(RESNET_OPS),
        "baseline_ms": 10.0,
        "cores": 2,
    }
    base.update(kw)
    return Facts(**base)


def _rules(f: Facts, rule: str) -> list[rules.Finding]:
    return [x for x in rules.run_rules(f) if x.rule == rule]


HEALTHY = _facts(
    measured={
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        "level:all": _m("level:all", 0.99, 0.95, 1.03),
        "threads:1": _m("threads:1", 1.4, 1.3, 1.5),
        "iobinding": _m("iobinding", 1.0, 0.97, 1.02),
    },
    profiled_ms=10.5,
)


def test_a_healthy_session_has_no_findings() -> None:
    assert rules.run_rules(HEALTHY) == []


def test_ep_fallback_fires_with_orts_reason() -> None:
    f = _facts(
        requested=SessionConfig(["cuda", "cpu"]),
        report=_report(
            (CUDA, CPU), (CPU,), ((CUDA, "libcublasLt.so.13: cannot open shared object file"),)
        ),
    )
    (x,) = _rules(f, "ep_fallback")
    assert x.severity == "error" and "libcublasLt.so.13" in x.evidence
    assert "CUDA did not load" in x.title and "not measurable here" in x.gain
    assert rules.run_rules(f)[0] is not None and rules.run_rules(f)[0].rule == "ep_fallback"
    assert _rules(HEALTHY, "ep_fallback") == []


def test_ep_islands_from_the_openvino_placement() -> None:
    pl = _replay()
    f = _facts(placement=pl, measured={"cpu-only": _m("cpu-only", 1.3, 1.2, 1.4)})
    (x,) = _rules(f, "ep_islands")
    assert "2 OpenVINO partition(s) and 1 CPU island(s)" in x.evidence
    assert "IsNaN" in x.evidence and "2 tensors cross" in x.evidence
    assert "81,920 bytes" in x.evidence  # 65,536 + 16,384 (the fixture's boundary tensors)
    assert x.nodes == ["/sanitize/IsNaN"]
    assert x.gain.startswith("the same model on the CPU EP alone: ") and x.saved_ms == 0
    assert _rules(HEALTHY, "ep_islands") == []


def test_optimization_level_below_extended_with_its_measured_gain() -> None:
    f = _facts(
        requested=SessionConfig(level="basic"),
        measured={"level:all": _m("level:all", 0.6, 0.55, 0.65, p50=6.0)},
    )
    (x,) = _rules(f, "optimization_level")
    assert "'basic'" in x.title and x.ratio == 0.6 and x.saved_ms == pytest.approx(4.0)
    assert x.gain == "verdict of level:all"
    for level in ("extended", "layout", "all"):
        assert _rules(_facts(requested=SessionConfig(level=level)), "optimization_level") == []


def test_unfused_transformer_with_export_advice() -> None:
    f = _facts(
        op_counts=dict(BERT_OPS),
        attention_reason="the graph comes from PyTorch's SDPA",
        transformer_fused={"SkipLayerNormalization": 4},
        measured={"variant:transformers": _m("variant:transformers", 0.8, 0.7, 0.9)},
    )
    (x,) = _rules(f, "unfused_transformer")
    assert "16 MatMul, 2 Softmax" in x.evidence and "fused 4 SkipLayerNormalization" in x.evidence
    assert "SDPA" in x.fix and x.ratio == 0.8
    assert _rules(HEALTHY, "unfused_transformer") == []  # a CNN
    fused = _facts(op_counts={**BERT_OPS, "Attention": 2})
    assert _rules(fused, "unfused_transformer") == []  # already optimized


def test_initializer_inputs_blocker() -> None:
    m = ortlab.load(models.initializers_as_inputs())
    from ortlab.optimization import initializer_input_blocker

    f = _facts(
        initializer_blocker=initializer_input_blocker(m),
        measured={
            "variant:no-initializer-inputs": _m("variant:no-initializer-inputs", 0.7, 0.6, 0.8)
        },
    )
    (x,) = _rules(f, "initializer_inputs")
    assert "5 initializers are also listed as graph inputs" in x.evidence
    assert "without_initializer_inputs" in x.code and x.ratio == 0.7
    assert initializer_input_blocker(ortlab.load(ortlab.examples.mlp())) is None


def test_thread_sweep_curve_and_contention() -> None:
    sweep = {
        "threads:1": _m(
            "threads:1", 0.8, 0.75, 0.85, p50=8.0, config=SessionConfig(intra_op_threads=1)
        ),
        "threads:2": _m("threads:2", 1.0, 0.97, 1.03),
        "spin:off": _m("spin:off", 1.01, 0.98, 1.04),
    }
    (x,) = _rules(_facts(measured=sweep), "threads")
    assert x.title.startswith("threads:1") or "intra" in x.code
    assert "intra_op_threads=1" in x.code and "spin:off" in x.evidence.replace(
        "no-spin", "spin:off"
    )
    assert x.evidence.count("ms (") == 3  # the whole curve, not just the winner
    over = _rules(
        _facts(
            requested=SessionConfig(intra_op_threads=16),
            cores=2,
            measured={"threads:2": _m("threads:2", 1.0, 0.97, 1.03)},
        ),
        "threads",
    )
    assert len(over) == 1 and "more than the 2 physical cores" in over[0].title
    assert _rules(HEALTHY, "threads") == []


def test_quantization_opportunity_shows_the_accuracy_cost() -> None:
    f = _facts(
        op_counts=dict(BERT_OPS),
        measured={
            "variant:quant-dynamic": _m(
                "variant:quant-dynamic", 0.8, 0.75, 0.86, cosine=0.9991, variant="m [dynamic int8]"
            ),
            "variant:quant-static": _m(
                "variant:quant-static", 0.5, 0.45, 0.55, cosine=0.91, variant="m [static QDQ]"
            ),
        },
    )
    found = {x.title.split(":")[0]: x for x in _rules(f, "quantization")}
    assert "output cosine 0.9991" in found["m [dynamic int8]"].evidence
    assert "mode='dynamic'" in found["m [dynamic int8]"].code
    assert "below 0.999, so the doctor did not pick it" in found["m [static QDQ]"].evidence
    assert _rules(HEALTHY, "quantization") == []


def test_slower_variant_explained_by_its_kernels() -> None:
    slow = _m("variant:quant-dynamic", 7.1, 6.8, 7.4, p50=71.0, variant="resnet50 [dynamic int8]")
    sig = Signal(
        "resnet50 [dynamic int8]",
        "conv-heavy model quantized dynamically",
        "53 convolutions ran as ConvInteger",
        "use static quantization (QDQ)",
    )
    (x,) = _rules(_facts(measured={slow.key: slow}, variant_signals=[sig]), "slow_variant")
    assert "ConvInteger" in x.evidence and "static quantization" in x.fix
    assert x.saved_ms == pytest.approx(61.0)  # sorted by what it costs
    fast = _m("variant:quant-dynamic", 0.8, 0.7, 0.9, variant="x")
    assert _rules(_facts(measured={fast.key: fast}), "slow_variant") == []


def test_io_binding_for_small_models() -> None:
    f = _facts(baseline_ms=0.2, measured={"iobinding": _m("iobinding", 0.85, 0.8, 0.9, p50=0.17)})
    (x,) = _rules(f, "io_binding")
    assert "0.200 ms" in x.evidence and "run_with_iobinding" in x.code
    assert _rules(HEALTHY, "io_binding") == []


def test_tensorrt_with_dynamic_shapes() -> None:
    f = _facts(
        requested=SessionConfig(["trt", "cuda", "cpu"]),
        symbolic_inputs={"input_ids": ["batch", "sequence"]},
    )
    (x,) = _rules(f, "trt_dynamic_shapes")
    assert "batch, sequence" in x.evidence and "trt_profile_min_shapes" in x.code
    assert "TensorRT did not load" in x.gain
    assert _rules(_facts(requested=SessionConfig(["trt", "cpu"])), "trt_dynamic_shapes") == []
    assert _rules(_facts(symbolic_inputs={"x": ["n"]}), "trt_dynamic_shapes") == []


def test_cuda_graph_eligibility() -> None:
    (x,) = _rules(_facts(requested=SessionConfig(["cuda", "cpu"])), "cuda_graph")
    assert "enable_cuda_graph" in x.code and "CUDA did not load" in x.gain
    loop = _facts(requested=SessionConfig(["cuda", "cpu"]), op_counts={"Loop": 1, "Add": 2})
    assert _rules(loop, "cuda_graph") == []
    dyn = _facts(requested=SessionConfig(["cuda", "cpu"]), symbolic_inputs={"x": ["n"]})
    assert _rules(dyn, "cuda_graph") == []
    assert _rules(HEALTHY, "cuda_graph") == []


def test_profiling_overhead_on_tiny_models() -> None:
    (x,) = _rules(_facts(baseline_ms=0.1, profiled_ms=0.3), "profiling_overhead")
    assert "3.0x" in x.title and x.severity == "info"
    assert _rules(_facts(baseline_ms=40.0, profiled_ms=60.0), "profiling_overhead") == []


def test_findings_sorted_errors_first_then_by_cost() -> None:
    f = _facts(
        requested=SessionConfig(["cuda", "cpu"], level="disabled"),
        report=_report((CUDA, CPU), (CPU,), ((CUDA, "no CUDA"),)),
        initializer_blocker="blocked",
        measured={
            "level:all": _m("level:all", 0.5, 0.45, 0.55, p50=5.0),
            "variant:no-initializer-inputs": _m(
                "variant:no-initializer-inputs", 0.9, 0.85, 0.95, p50=9.0
            ),
        },
    )
    order = [x.rule for x in rules.run_rules(f)]
    assert order[0] == "ep_fallback"
    assert order.index("optimization_level") < order.index("initializer_inputs")


# ---------------------------------------------------------------------- real doctor runs


@pytest.fixture(scope="module")
def conv_doctor() -> ortlab.DoctorResult:
    return ortlab.doctor(
        ortlab.examples.conv_bn_relu(), {"level": "disabled"}, budget_s=20, progress=False
    )


def test_doctor_measures_the_level_fix(conv_doctor: ortlab.DoctorResult) -> None:
    d = conv_doctor
    (x,) = [f for f in d.findings if f.rule == "optimization_level"]
    assert x.ratio is not None and x.low is not None and x.low <= x.ratio <= x.high  # type: ignore[operator]
    keys = {m.key for m in d.measured}
    assert {"baseline", "level:all", "threads:1", "spin:off"} <= keys
    assert d.rounds >= 4 and d.runs >= 3
    t = d.to_pandas()
    assert list(t.columns)[:3] == ["rule", "severity", "title"] and len(t) == len(d.findings)
    assert set(d.candidates()["pareto"]) <= {True, False} and d.pareto_set()
    assert len(d.threads()) >= 2
    for kind in ("candidates", "threads", "pareto"):
        assert d.plot(kind).data


def test_best_snippet_runs_with_plain_onnxruntime(conv_doctor: ortlab.DoctorResult) -> None:
    best = conv_doctor.best
    assert isinstance(best.session_config, SessionConfig)
    code = best.snippet()
    assert "import ortlab" not in code
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


def test_doctor_result_json_round_trip(conv_doctor: ortlab.DoctorResult, tmp_path: Any) -> None:
    again = ortlab.DoctorResult.from_json(conv_doctor.to_json())
    assert again.findings == conv_doctor.findings and again.best == conv_doctor.best
    assert isinstance(again.profile, ortlab.ProfileResult)  # typed: the report can use it
    assert ortlab.report(ortlab.examples.conv_bn_relu(), again, path=tmp_path / "r.html",
                         compute=False).exists()  # fmt: skip
    assert "<DoctorResult 'conv_bn_relu'" in repr(again)
    assert "Best verified" in again._repr_html_() and "BEST:" in again.to_text()


def test_doctor_catches_a_silent_cuda_fallback() -> None:
    d = ortlab.doctor(
        ortlab.examples.mlp(), providers=["cuda", "cpu"], budget_s=8, quantize=False, progress=False
    )
    assert d.findings[0].rule == "ep_fallback" and d.findings[0].severity == "error"
    assert "CUDA" in d.findings[0].title
    dynamic = any(
        isinstance(x, str) for t in ortlab.load(ortlab.examples.mlp()).inputs for x in t.shape or []
    )
    assert any(f.rule == "cuda_graph" for f in d.findings) is not dynamic


def test_doctor_fixes_initializer_inputs() -> None:
    d = ortlab.doctor(models.initializers_as_inputs(), budget_s=8, progress=False)
    (x,) = [f for f in d.findings if f.rule == "initializer_inputs"]
    assert x.ratio is not None  # the fixed variant was timed against the original
    m = {c.key: c for c in d.measured}["variant:no-initializer-inputs"]
    assert m.cosine == pytest.approx(1.0)


def test_doctor_explains_a_slower_int8_variant() -> None:
    m = ortlab.load(ortlab.examples.conv_bn_relu())
    q = ortlab.quantize(m, mode="dynamic")  # ConvInteger: ~10x slower on this model
    d = ortlab.doctor(m, variants=[q], budget_s=10, quantize=False, progress=False)
    (x,) = [f for f in d.findings if f.rule == "slow_variant"]
    assert "ConvInteger" in x.evidence and "static quantization" in x.fix
    assert x.ratio is not None and x.ratio > 1


@pytest.mark.slow
def test_doctor_on_a_transformer_runs_the_optimizer() -> None:
    d = ortlab.doctor(ortlab.examples.bert_tiny(), budget_s=20, progress=False)
    (x,) = [f for f in d.findings if f.rule == "unfused_transformer"]
    assert "2 Attention" in x.evidence and x.ratio is not None
    assert {"variant:transformers", "variant:quant-dynamic"} <= {m.key for m in d.measured}


def test_doctor_quiet_parts_on_a_healthy_cnn(conv_doctor: ortlab.DoctorResult) -> None:
    rules_seen = {f.rule for f in conv_doctor.findings}
    assert not rules_seen & {
        "ep_fallback",
        "ep_islands",
        "unfused_transformer",
        "initializer_inputs",
        "trt_dynamic_shapes",
        "cuda_graph",
    }


# ---------------------------------------------------------------------- report and CLI

HOSTILE = "<img src=x onerror=alert(1)>"


def test_report_is_self_contained_and_escapes_model_strings(
    tmp_path: Any, conv_doctor: ortlab.DoctorResult
) -> None:
    m = ortlab.load(models.add([1, 4]))
    proto = m.proto
    proto.graph.node[0].name = HOSTILE
    proto.graph.node[0].op_type = "Add"
    hostile = ortlab.load(proto, name="hostile</script><script>alert(2)</script>")
    out = ortlab.report(hostile, path=tmp_path / "r.html")
    text = out.read_text()
    assert HOSTILE not in text and "<script>alert(2)" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text or "\\u003cimg" in text
    assert "Content-Security-Policy" in text
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)  # nothing fetched
    assert text.count("Plotly.newPlot") >= 3  # op type, sunburst, timeline (+ optimization)
    for section in ("Graph optimization levels", "Profile: where the time goes", "Environment"):
        assert section in text
    full = ortlab.report(
        ortlab.examples.conv_bn_relu(), conv_doctor, path=tmp_path / "d.html", compute=False
    )
    assert "Doctor: findings and verified fixes" in full.read_text()


def test_cli_doctor_and_report(tmp_path: Any) -> None:
    from ortlab.cli import main

    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(ortlab.examples.mlp(), path)
    out = tmp_path / "out.json"
    assert main(["doctor", str(path), "--budget", "6", "--json", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["ortlab"] == "DoctorResult" and "findings" in data["data"]
    html = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(html), "--budget", "6"]) == 0
    assert "ortlab report" in html.read_text()
