from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ortlab
from ortlab.cli import main


def test_inspect_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "bert_tiny"]) == 0
    out = capsys.readouterr().out
    assert "input_ids" in out and "[batch, sequence]" in out
    assert main(["inspect", "bert_tiny", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ortlab"] == "ModelSummary"
    assert ortlab.ModelSummary.from_json(json.dumps(data)).node_count == 115


def test_bench_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "mlp", "--providers", "cpu", "--level", "all", "--runs", "7", "--json"])
    assert code == 0
    b = ortlab.BenchmarkResult.from_json(capsys.readouterr().out)
    assert b.stats.count == 7 and b.config.level == "all"


def test_bench_text_with_dims(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["bench", "bert_tiny", "--runs", "3", "--dims", "sequence=16", "--threads", "1"]) == 0
    )
    out = capsys.readouterr().out
    assert "p50" in out and "sequence=16 (given)" in out


def test_profile_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "mlp", "--runs", "3", "--top", "2"]) == 0
    assert "By op type" in capsys.readouterr().out
    assert main(["profile", "mlp", "--runs", "3", "--json"]) == 0
    p = ortlab.ProfileResult.from_json(capsys.readouterr().out)
    assert p.runs == 3


def test_profile_names_kernels_by_the_nodes_they_compute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At level all ORT's kernels are r145_nchwc and the like; the CLI's top table names each
    after the model's own nodes (as the Lab and the report do), checked against plain
    onnxruntime's saved optimized graph and the model's node names."""
    import re

    import onnx
    import onnxruntime as ort

    path = ortlab.examples.path("resnet50")
    original = {n.name for n in onnx.load(str(path), load_external_data=False).graph.node}
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    final = {n.name for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node}
    assert main(["profile", "resnet50", "--runs", "2", "--warmup", "1", "--top", "6"]) == 0
    out = capsys.readouterr().out
    rows = out.split("Top 6 nodes:")[1].strip().splitlines()[2:8]
    kernels = [re.search(r"\(kernel (\S+)\)", r) for r in rows]
    assert all(kernels), rows  # every top Conv here is a fused NCHWc kernel
    for row, k in zip(rows, kernels, strict=True):
        assert k is not None and k.group(1) in final and k.group(1) not in original
        first = row.split(" ")[0]
        assert first in original and first not in final, row


def test_errors_exit_2_with_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage" * 10)
    assert main(["inspect", str(bad)]) == 2
    assert "ortlab: error:" in capsys.readouterr().err
    assert main(["bench", "mlp", "--providers", "cudaa"]) == 2
    assert "Unknown execution provider 'cudaa'" in capsys.readouterr().err


def test_providers_and_examples_and_cache(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["loadable"][-1] == "CPUExecutionProvider"
    import onnxruntime as ort  # the worker's answer against plain onnxruntime here

    assert info["onnxruntime"] == ort.__version__
    assert set(ort.get_available_providers()) <= set(info["in_build"])
    assert main(["providers"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"onnxruntime {ort.__version__}"
    assert text[1] == f"in this build: {', '.join(info['in_build'])}"
    assert text[-2].startswith("devices: ")
    assert text[-1].startswith("runtime telemetry: ortlab's worker and children: ")
    for p in info["plugins"]:  # each plugin on a line with its devices or its failure
        assert any(line.startswith(f"  - {p['name']} (") for line in text), p
    assert main(["examples"]) == 0
    assert "resnet50" in capsys.readouterr().out
    assert main(["cache", "info"]) == 0
    assert "ortlab-test-cache" in capsys.readouterr().out


def test_console_script_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ortlab.cli", "inspect", "squeezenet"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "data_0" in out.stdout


def test_place_and_optimize(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["place", "conv_bn_relu", "--runs", "2"]) == 0
    assert "Partitions (1)" in capsys.readouterr().out
    assert main(["place", "conv_bn_relu", "--runs", "2", "--json"]) == 0
    assert ortlab.PlacementResult.from_json(capsys.readouterr().out).runs == 2
    assert (
        main(
            [
                "optimize",
                "conv_bn_relu",
                "--levels",
                "disabled,extended",
                "--rounds",
                "3",
                "--runs",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "ConvActivationFusion" in out and "extended" in out
    assert main(["optimize", "conv_bn_relu", "--no-timing", "--json"]) == 0
    assert ortlab.OptimizationResult.from_json(capsys.readouterr().out).latency_rows == []


def test_quantize_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mlp_int8.onnx"
    assert main(["quantize", "mlp", "--mode", "dynamic", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "dynamic int8 variant of mlp" in text and "quantize_dynamic" in text
    assert out.exists() and ortlab.load(out).summary.op_types.get("DynamicQuantizeLinear")
    assert main(["quantize", "mlp", "--mode", "fp16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["variant"] == "fp16"
    src = ortlab.examples.path("mlp")
    assert main(["quantize", str(src), "--mode", "dynamic", "-o", str(src)]) == 2
    assert "never overwrites it" in capsys.readouterr().err


def test_hostile_strings_print_as_inert_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ANSI escapes, bidi overrides and HTML in node/op/metadata strings reach the terminal as
    visible text, never as control sequences."""
    import onnx

    from tests import models

    proto = models.add([1, 4])
    evil = "\x1b[2J\x1b[31mRED\u202eevil<script>alert(1)</script>"
    proto.graph.node[0].name = evil
    proto.producer_name = evil
    proto.graph.input[0].name = proto.graph.node[0].input[0] = "x\x1b]0;title\x07"
    path = tmp_path / "hostile.onnx"
    onnx.save(proto, path)
    for argv in (["inspect", str(path)], ["profile", str(path), "--runs", "2", "--warmup", "0"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
        assert "\\x1b[31mRED" in out or "\\x1b]0;title" in out


# ---------------------------------------------------------------------- a state model (issue 13)


def vad_like(folder: Path) -> Path:
    """A stand-in for silero VAD: ``input: float[?, ?]`` and ``state: float[2, ?, 128]`` with
    unnamed dims, ``sr: int64[]``. It runs only when input's last dim is 512 and state's middle
    dim equals input's first: the synthesizer's 1s make it fail."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((512, 128)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["input", "w"], ["h"], name="proj"),
        helper.make_node("Add", ["state", "h"], ["stateN"], name="update"),
        helper.make_node("ReduceMean", ["stateN"], ["m"], name="pool", axes=[0, 2], keepdims=0),
        helper.make_node("Cast", ["sr"], ["srf"], name="sr_float", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["m", "srf"], ["output"], name="scale"),
    ]
    graph = helper.make_graph(
        nodes,
        "vad_like",
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, None]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, None, 128]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [
            helper.make_tensor_value_info("output", TensorProto.FLOAT, [None]),
            helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, None, 128]),
        ],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "vad_like.onnx"
    onnx.save(model, path)
    return path


def vad_feeds() -> dict[str, object]:
    import numpy as np

    rng = np.random.default_rng(1)
    return {
        "input": rng.standard_normal((1, 512)).astype(np.float32),
        "state": np.zeros((2, 1, 128), np.float32),
        "sr": np.array(16000, np.int64),
    }


@pytest.fixture(scope="module")
def vad(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The state model and an .npz of feeds it runs with."""
    import numpy as np

    folder = tmp_path_factory.mktemp("vad")
    npz = folder / "feeds.npz"
    np.savez(npz, **vad_feeds())
    return vad_like(folder), npz


def test_feeds_npz_runs_a_state_model_on_every_session_verb(
    vad: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, npz = vad
    assert main(["bench", str(model), "--runs", "3"]) == 2  # synthesized 1s: shapes mismatch
    assert "ortlab: error:" in capsys.readouterr().err
    assert main(["bench", str(model), "--runs", "3", "--json", "--feeds", str(npz)]) == 0
    b = ortlab.BenchmarkResult.from_json(capsys.readouterr().out)
    assert "input: float32[1, 512]" in b.feeds and "state: float32[2, 1, 128]" in b.feeds
    assert main(["profile", str(model), "--runs", "2", "--json", "--feeds", str(npz)]) == 0
    p = ortlab.ProfileResult.from_json(capsys.readouterr().out)
    proj = p.data.input_types[p.data.node.index("proj")]
    assert proj[0] == ("float", (1, 512))  # ORT ran the node at the feeds' shape
    assert main(["place", str(model), "--runs", "2", "--feeds", str(npz)]) == 0
    assert "Partitions" in capsys.readouterr().out
    assert (
        main(
            [
                "optimize",
                str(model),
                "--levels",
                "disabled,all",
                "--rounds",
                "2",
                "--runs",
                "2",
                "--feeds",
                str(npz),
            ]
        )
        == 0
    )
    assert "disabled" in capsys.readouterr().out
    assert (
        main(
            [
                "quantize",
                str(model),
                "--mode",
                "static",
                "--samples",
                "2",
                "--json",
                "--feeds",
                str(npz),
            ]
        )
        == 0
    )
    info = json.loads(capsys.readouterr().out)
    assert "input: float32[1, 512]" in info["calibration"]
    out = tmp_path / "vad.html"
    assert (
        main(["report", str(model), "--no-doctor", "-o", str(out), "--json", "--feeds", str(npz)])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["report"] == str(out) and out.exists()


@pytest.mark.slow
def test_doctor_with_feeds_npz(vad: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    model, npz = vad
    code = main(
        ["doctor", str(model), "--budget", "10", "--no-quantize", "--json", "--feeds", str(npz)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert ortlab.DoctorResult.from_json(captured.out).model == "vad_like"


def test_feeds_errors_name_the_inputs_the_model_takes(
    vad: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    model, _ = vad
    npy = tmp_path / "one.npy"
    np.save(npy, np.zeros((1, 512), np.float32))
    text = tmp_path / "feeds.npz"
    text.write_text("input=1\n")
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, audio=np.zeros((1, 512), np.float32))
    cases = {
        str(tmp_path / "missing.npz"): "no such file",
        str(npy): "single .npy array",
        str(text): "not a readable .npz",
        str(wrong): "unknown ['audio']",
    }
    for path, what in cases.items():
        assert main(["bench", str(model), "--feeds", path]) == 2
        err = capsys.readouterr().err
        assert err.startswith("ortlab: error: --feeds") and what in err
        assert "input: float[?, ?]" in err and "state: float[2, ?, 128]" in err and "sr" in err
        assert "Traceback" not in err


def test_argument_errors_exit_2_with_the_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, what in (
        (["bench", "mlp", "--dims", "height=abc"], "argument --dims: dims: 'height=abc' is not"),
        (["bench", "mlp", "--runs", "0"], "argument --runs: expects an integer >= 1"),
        (["bench", "mlp", "--providers", "cudaa"], "Unknown execution provider 'cudaa'"),
        (["optimize", "mlp", "--levels", "all,fast"], "Unknown optimization level 'fast'"),
        (["doctor", "mlp", "--budget", "-3"], "argument --budget: expects seconds > 0"),
        (["bench", "mlp", "--dims", "batch=1", "--feeds", "f.npz"], "not allowed with"),
        (["quantize", "mlp", "--dims", "batch=x"], "argument --dims"),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("usage: ortlab") and what in err, err


def test_quantize_takes_dims_for_its_calibration_samples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            ["quantize", "mlp", "--mode", "static", "--samples", "2", "--dims", "batch=3", "--json"]
        )
        == 0
    )
    assert "input: float32[3, 256]" in json.loads(capsys.readouterr().out)["calibration"]
    assert main(["quantize", "mlp", "--dims", "height=3"]) == 0  # a name it lacks: warned
    err = capsys.readouterr().err
    assert "ortlab: warning:" in err and "['height'], which 'mlp' does not have" in err


@pytest.mark.parametrize("verb", ["optimize", "quantize", "doctor", "report", "bench"])
def test_internal_errors_are_one_line_with_exit_1(
    verb: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug (any exception that is not an OrtlabError) is reported in one line naming the
    verb, the model and the exception; ORTLAB_DEBUG=1 adds the traceback."""
    library = {
        "optimize": "optimization_diff",
        "quantize": "quantize",
        "doctor": "doctor",
        "report": "report",
        "bench": "benchmark",
    }

    def broken(*_args: object, **_kwargs: object) -> None:
        raise AssertionError  # ORT's quantizer raises it with no message

    monkeypatch.setattr(ortlab, library[verb], broken)
    argv = [
        verb,
        "mlp",
        *(["-o", str(tmp_path / "r.html"), "--no-doctor"] if verb == "report" else []),
    ]
    monkeypatch.delenv("ORTLAB_DEBUG", raising=False)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == (
        f"ortlab: internal error in {verb} on mlp: AssertionError: (no message) — this is a bug "
        "in ortlab; re-run with ORTLAB_DEBUG=1 for the traceback\n"
    )
    monkeypatch.setenv("ORTLAB_DEBUG", "1")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)") and "in broken" in err
    assert err.rstrip().endswith("this is a bug in ortlab; the traceback is above")


@pytest.mark.slow
def test_report_json_is_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mlp.html"
    assert main(["report", "mlp", "-o", str(out), "--budget", "10", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["report"] == str(out) and data["bytes"] == out.stat().st_size
    d = ortlab.DoctorResult.from_json(json.dumps(data["doctor"]))
    assert d.model == "mlp"


def _cuda_is_in_build_but_cannot_load() -> bool:
    import onnxruntime as ort

    from ortlab.engine.session import auto_providers

    in_build = "CUDAExecutionProvider" in ort.get_available_providers()
    return in_build and "CUDAExecutionProvider" not in auto_providers()[0]


_VERB_ARGS = {
    "bench": ["--runs", "3"],
    "profile": ["--runs", "2"],
    "place": ["--runs", "2"],
    "optimize": ["--levels", "disabled,all", "--rounds", "2", "--runs", "2"],
    "doctor": ["--budget", "10", "--no-quantize"],
    "report": ["--no-doctor", "-o", "{tmp}/r.html"],
}


@pytest.mark.skipif(
    not _cuda_is_in_build_but_cannot_load(),
    reason="needs an onnxruntime build with CUDA on a machine where it cannot load",
)
@pytest.mark.slow
@pytest.mark.parametrize("verb", list(_VERB_ARGS))
def test_every_verb_says_cuda_did_not_load(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = [a.format(tmp=tmp_path) for a in _VERB_ARGS[verb]]
    assert main([verb, "mlp", "--providers", "cuda,cpu", *extra]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "did not load" in line]
    assert warned and ("CUDA" in warned[0] or "cuda" in warned[0]), err
    assert all(line.startswith("ortlab: warning: ") for line in warned), err
    assert "ProviderFallbackWarning" not in err and ".py:" not in err  # not Python's format


@pytest.mark.parametrize("verb", ["bench", "profile", "doctor", "roofline", "throughput"])
def test_help_shows_the_defaults_a_run_uses(verb: str) -> None:
    """Every option's help names the default that a run without it really uses: read from the
    namespace the parser gives for ``ortlab VERB model`` alone, not from the help text."""
    from ortlab.cli import _parser

    parser = _parser()
    used = vars(parser.parse_args([verb, "model.onnx"]))
    command = next(a for a in parser._actions if a.dest == "command").choices[verb]
    text = " ".join(command.format_help().split())
    for action in command._actions:
        value = used.get(action.dest)
        if not action.option_strings or value is None or value is False or action.dest == "help":
            continue
        shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        assert f"(default: {shown})" in text, (verb, action.dest, shown)
