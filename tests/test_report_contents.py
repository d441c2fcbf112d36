"""What the HTML report says, checked on results built by hand (no ORT session, no browser):
the environment the results were measured on (not the machine that renders the page), whether
inputs were synthetic and at which shapes, and no cache or home-directory path anywhere.

The builders here are shared with the browser test of hostile model strings
(tests/ui/test_hostile_strings.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import ortlab
from ortlab.analysis.benchmark import BenchmarkResult, environment
from ortlab.analysis.profiling import ProfileData, ProfileResult
from ortlab.core.cache import cache_dir
from ortlab.core.config import SessionConfig
from ortlab.core.stats import Paired, latency_stats
from ortlab.diagnosis.doctor import Best, DoctorResult
from ortlab.diagnosis.facts import Finding, Measured
from ortlab.engine.session import SessionReport
from ortlab.views.report import report_html
from tests import models

CPU = "CPUExecutionProvider"
FEEDS = "x: float32[1, 4] | dims batch=1 (batch-like)"
ELSEWHERE = {
    "ortlab": "0.0.1",
    "onnxruntime": "1.17.3",
    "python": "3.10.2",
    "platform": "Windows-10-10.0.19045-SP0",
    "cpu": "Intel(R) Xeon(R) Platinum 8175M CPU @ 2.50GHz (recorded)",
    "cpu_count": "96",
}


def session_report() -> SessionReport:
    return SessionReport(
        requested=[CPU], active=[CPU], missing=[], level="all", create_ms=3.0, ort_version="1.17.3"
    )


def profile_result(model: str = "g", node: str = "add", op_type: str = "Add") -> ProfileResult:
    """Two nodes, three runs: enough for every profile table and chart."""
    data = ProfileData(
        node=[node, "relu"],
        op_type=[op_type, "Relu"],
        provider=[CPU, CPU],
        input_types=[[("float", [1, 4])], [("float", [1, 4])]],
        output_types=[[("float", [1, 4])], [("float", [1, 4])]],
        ev_node=[0, 1] * 3,
        ev_run=[0, 0, 1, 1, 2, 2],
        ev_start_us=[0.0, 5.0] * 3,
        ev_dur_us=[4.0, 2.0, 4.5, 2.5, 3.5, 2.0],
        run_us=[8.0, 9.0, 7.0],
    )
    notes = ["Times are measured with ORT's profiler on (about 5 µs of overhead per node)."]
    return ProfileResult(
        model=model,
        config=SessionConfig(),
        data=data,
        report=session_report(),
        notes=notes,
    )


def benchmark_result(model: str = "g", feeds: str = FEEDS) -> BenchmarkResult:
    ns = [1_000_000 + 10_000 * i for i in range(20)]
    return BenchmarkResult(
        model=model,
        config=SessionConfig(),
        latencies_ns=ns,
        stats=latency_stats(ns),
        warmup=2,
        report=session_report(),
        feeds=feeds,
        environment=dict(ELSEWHERE),
    )


def _measured(key: str, ratio: float, variant: str, path: str, stage: str = "screen") -> Measured:
    return Measured(
        key=key,
        label=key,
        variant=variant,
        model_path=path,
        config=SessionConfig(level="all"),
        p50_ms=1.0 * ratio,
        paired=Paired(ratio, ratio - 0.05, ratio + 0.05, f"{key}: time ratio {ratio:.2f}"),
        cosine=0.9995,
        file_bytes=4096,
        stage=stage,
    )


def doctor_result(model: str = "g", environment: dict[str, str] | None = None) -> DoctorResult:
    """A doctor result whose best is a quantized variant kept in ortlab's cache, as a real run
    on another machine leaves it."""
    variant_path = str(cache_dir() / "variants" / "0123abcd-int8-dynamic.onnx")
    original = str(Path.home() / "models" / f"{model}.onnx")
    measured = [
        _measured("baseline", 1.0, "original", original),
        _measured("level:all", 0.8, "original", original),
        _measured("threads:1", 1.1, "original", original),
        _measured("variant:dynamic", 0.6, "int8-dynamic", variant_path),
        _measured("combined", 0.5, "int8-dynamic", variant_path, stage="final"),
    ]
    best = Best(
        config=SessionConfig(level="all"),
        variant="int8-dynamic",
        model_path=variant_path,
        steps=["quant_pre_process", "quantize_dynamic"],
        paired=Paired(0.5, 0.45, 0.55, "2.00x faster"),
        cosine=0.9995,
    )
    finding = Finding(
        rule="level",
        title="graph optimization level is 'basic'",
        evidence="measured",
        fix="level='all'",
        code="SessionConfig(level='all')",
        gain="1.25x faster",
    )
    return DoctorResult(
        model=model,
        model_path=original,
        requested=SessionConfig(),
        findings=[finding],
        measured=measured,
        best=best,
        baseline_ms=1.0,
        rounds=8,
        runs=10,
        budget_s=60.0,
        elapsed_s=42.0,
        environment=dict(environment or ELSEWHERE),
        profile=profile_result(model),
    )


def _text(html: str) -> str:
    """The page's text, tags dropped (scripts and data blocks dropped with their content)."""
    import html as h

    body = re.sub(r"<script\b.*?</script>", " ", html, flags=re.S)
    return h.unescape(re.sub(r"<[^>]+>", " ", body))


# ------------------------------------------------------------------------------ environment


def test_report_shows_the_environment_the_doctor_measured_on() -> None:
    m = ortlab.load(models.add([1, 4]))
    d = ortlab.DoctorResult.from_json(doctor_result().to_json())  # as saved on the other machine
    text = _text(report_html(m, d))
    assert "Xeon(R) Platinum 8175M" in text, "the recorded CPU is shown"
    assert "1.17.3" in text, "the recorded onnxruntime version is shown"
    assert "measured on" in text.lower()
    here = environment()
    assert here["onnxruntime"] != ELSEWHERE["onnxruntime"]
    assert "differ" in text.lower(), "a page rendered on another machine flags the difference"
    assert here["onnxruntime"] in text, "and shows this machine too"


def test_same_machine_is_not_flagged() -> None:
    m = ortlab.load(models.add([1, 4]))
    d = doctor_result(environment=environment())
    text = _text(report_html(m, d))
    assert "measured on" in text.lower()
    assert "differ" not in text.lower()


# ------------------------------------------------------------------------------ inputs


def _section(html: str, title: str) -> str:
    """The text of one report section (by its heading)."""
    found = re.search(
        rf"<section id='s\d+'><h2>{re.escape(title)}</h2>(.*?)</section>", html, flags=re.S
    )
    assert found, f"the report has no {title!r} section"
    return _text(found.group(1))


def test_report_says_its_own_measurements_ran_on_synthetic_inputs(tmp_path: Path) -> None:
    m = ortlab.load(models.add([1, 4]))
    out = ortlab.report(m, path=tmp_path / "r.html", levels=("disabled", "all"))
    html = out.read_text(encoding="utf-8")
    for title in ("Profile: where the time goes", "Graph optimization levels"):
        text = _section(html, title)
        assert "Timings: measured on synthetic inputs" in text, title
        assert "x: float32[1, 4]" in text, f"{title}: the shapes it ran at"
    assert "Measured on: this machine" in _text(html)


def test_given_feeds_are_not_called_synthetic(tmp_path: Path) -> None:
    import numpy as np

    m = ortlab.load(models.add(["n", 4]))
    feeds = {"x": np.ones([3, 4], np.float32)}
    out = ortlab.report(m, path=tmp_path / "r.html", feeds=feeds, levels=("disabled", "all"))
    text = _section(out.read_text(encoding="utf-8"), "Profile: where the time goes")
    assert "Timings: measured on inputs you gave" in text and "x: float32[3, 4]" in text


def test_results_that_do_not_record_inputs_say_so() -> None:
    m = ortlab.load(models.add([1, 4]))
    html = report_html(m, profile=profile_result(), benchmark=benchmark_result())
    bench = _section(html, "Benchmark")
    assert "x: float32[1, 4]" in bench, "the benchmark names the input shapes it timed"
    prof = _section(html, "Profile: where the time goes")
    assert "shapes not recorded in this result" in prof
    assert "synthetic or given: not recorded" in prof


def test_compare_section_says_synthetic_and_eval_data() -> None:
    from ortlab.analysis.quantization.compare import CompareResult, VariantRow

    def row(name: str, ratio: float) -> VariantRow:
        return VariantRow(
            variant=name,
            path=str(cache_dir() / f"{name}.onnx"),
            file_bytes=4096,
            size_ratio=ratio,
            p50_ms=ratio,
            p90_ms=ratio,
            paired=Paired(ratio, ratio - 0.1, ratio + 0.1, ""),
            kernels={"Add": 1},
            quantized_kernels={},
            steps=[],
            synthetic=True,
            errors={"y": {"cosine": 0.99, "max_abs": 0.1}},
        )

    m = ortlab.load(models.add([1, 4]))
    c = CompareResult(
        model="g",
        config=SessionConfig(),
        rows=[row("fp32", 1.0), row("int8", 0.5)],
        signals=[],
        eval_data="8 synthetic samples (random inputs)",
        synthetic=True,
    )
    section = _section(report_html(m, compare=c), "Quantization comparison")
    assert "Accuracy (cosine, SQNR, top-1): measured on synthetic inputs" in section
    assert "8 synthetic samples" in section


# ------------------------------------------------------------------------------ paths


def assert_no_private_paths(html: str) -> None:
    for private in (str(cache_dir()), str(Path.home())):
        assert private not in html, f"{private!r} (cache or home directory) is in the report"


def test_report_carries_no_cache_or_home_path(tmp_path: Path) -> None:
    m = ortlab.load(models.add([1, 4]))  # loaded from a proto: the file is a copy in the cache
    assert str(cache_dir()) in str(m.path)
    d = doctor_result()
    out = ortlab.report(m, d, path=tmp_path / "r.html", compute=False, benchmark=benchmark_result())
    html = out.read_text(encoding="utf-8")
    assert_no_private_paths(html)
    text = _text(html)
    assert "ort.InferenceSession('int8-dynamic.onnx'" in text, "the snippet names the variant"
    assert "of model.onnx" in text and "#   quantize_dynamic" in text, "and how to rebuild it"


def test_users_own_file_is_named_by_its_file_name(tmp_path: Path) -> None:
    import onnx

    home_like = tmp_path / "home" / "me"
    home_like.mkdir(parents=True)
    path = home_like / "detector.onnx"
    onnx.save(models.add([1, 4]), path)
    m = ortlab.load(path)
    d = dataclasses.replace(doctor_result("detector"), model_path=str(path))
    best = dataclasses.replace(d.best, variant="original", model_path=str(path), steps=[])
    d = dataclasses.replace(d, best=best)
    html = report_html(m, d)
    assert str(home_like) not in html
    assert "detector.onnx" in _text(html)


# ------------------------------------------------------------------------------ script data


def test_script_json_is_inert_in_a_script_element_and_means_the_same() -> None:
    import json

    from ortlab.views.html import script_json

    value = {"name": "</script><!--<script>\u2028\u2029&", "t": [1.5, float("nan")]}
    text = script_json(value)
    assert not re.search("[<>&\u2028\u2029]", text), text
    assert json.loads(text) == {"name": value["name"], "t": [1.5, None]}  # NaN: valid JSON


def test_inline_scripts_are_allowed_by_hash_only(tmp_path: Path) -> None:
    from plotly.offline import get_plotlyjs

    from ortlab.views.html import csp_hash, inline_script

    m = ortlab.load(models.add([1, 4]))
    html = report_html(m, profile=profile_result())
    policy = re.search(r"Content-Security-Policy' content=\"([^\"]+)\"", html)
    assert policy
    script_src = policy.group(1).split("script-src", 1)[1].split(";")[0].split()
    assert "'unsafe-inline'" not in script_src and csp_hash(get_plotlyjs()) in script_src
    hashes = [x for x in script_src if x.startswith("'sha256-")]
    assert len(hashes) == 3, "plotly.js, the figure loader and the graph view's module"
    assert set(script_src) - set(hashes) == {"blob:"}, "the graph's modules and layout worker"
    with pytest.raises(ValueError, match="script_json"):
        inline_script("const a = '</script>';")
    page = ortlab.graph(m).to_html(tmp_path / "g.html").read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert "'unsafe-inline'" not in page.split("script-src", 1)[1].split(";")[0]


def test_report_shows_what_if_as_a_prediction_with_its_reasons() -> None:
    """The wheel's NNAPI checker on a bundled model: the section is labelled predicted, names
    its evidence, and carries the same reasons as ``w.reasons()``."""
    m = ortlab.examples.load("nan_guard_cnn")
    w = ortlab.whatif(m, ["nnapi"], progress=False)
    html = report_html(m, whatif=w)
    section = html.split("Where would it run? (predicted, not measured)", 1)[1]
    assert "rules" in section, "the evidence the prediction rests on"
    for r in w.reasons().itertuples():
        assert r.reason in section
    assert "Where would it run?" not in report_html(m), "no what-if, no section"


def test_report_shows_memory_when_ort_recorded_it() -> None:
    m = ortlab.examples.load("squeezenet")
    measured = ortlab.profile(m, runs=2, progress=False)
    assert "memory over one run" in report_html(m, profile=measured)
    assert "memory over one run" not in report_html(m, profile=profile_result()), "not recorded"


# ------------------------------------------------------------------------------ the verdict first


def test_report_opens_with_a_verdict() -> None:
    """The first section says where the time goes (top op types with the profile's own
    shares), the findings with their measured gains, the best verified configuration with its
    snippet, and the conditions; the model's metadata comes after it."""
    m = ortlab.load(models.add([1, 4]))
    d = doctor_result(environment=environment())
    html = report_html(m, d, benchmark=benchmark_result())
    first = re.search(r"<section id='s0'><h2>([^<]*)</h2>", html)
    assert first and first.group(1) == "Summary"
    text = re.sub(r"\s+", " ", _section(html, "Summary")).replace(" ,", ",")
    ops = d.profile.by_op_type()
    for r in ops.head(3).itertuples():  # one number, one home: the profile's shares
        assert f"{r.op_type} {r.share:.0%}" in text
    assert "graph optimization level is 'basic' — 1.25x faster" in text
    assert "Best verified : int8-dynamic" in text and "InferenceSession(" in text
    assert "Conditions :" in text and "inputs " in text
    assert "p50 " in text and "profiling off" in text


def test_long_model_metadata_folds() -> None:
    proto = models.add([1, 4])
    proto.metadata_props.add(key="character", value="\n".join(chr(0x4E00 + i) for i in range(6000)))
    html = report_html(ortlab.load(proto), profile=profile_result())
    model = re.search(r"<h2>Model</h2>(.*?)</section>", html, flags=re.S)
    assert model and "<details><summary>metadata the model carries (1 entries" in model.group(1)


def test_report_shows_cost_and_roofline_sections_labelled() -> None:
    """Results given in ``extra`` are sections of their own, in their own words: the cost
    says computed, the roofline measured; each with its figure and the same table as its
    notebook view."""
    m = ortlab.examples.load("mlp")
    cost = ortlab.cost(m, progress=False)
    roof = ortlab.roofline(m, runs=3, progress=False)
    html = report_html(m, extra=[cost, roof])
    from ortlab.views.html import esc
    from ortlab.views.report import SECTION_TITLES

    for kind in ("CostResult", "RooflineResult"):
        assert f"<h2>{esc(SECTION_TITLES[kind])}</h2>" in html
    assert "computed from shapes, not measured" in SECTION_TITLES["CostResult"]
    assert cost._repr_html_() in html and roof._repr_html_() in html
    assert html.count('class="ortlab-figure"') == 2  # one figure each, no other section here
