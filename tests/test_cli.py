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
    assert b.stats.count == 7 and b.session_config.level == "all"


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
    assert main(["examples"]) == 0
    assert "resnet50" in capsys.readouterr().out
    assert main(["cache", "info"]) == 0
    assert "ortlab-test-cache" in capsys.readouterr().out


def test_console_script_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ortlab.cli", "inspect", "squeezenet"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "data_0" in out.stdout


def test_place_and_optimize(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["place", "conv_bn_relu", "--runs", "2"]) == 0
    assert "Partitions (1)" in capsys.readouterr().out
    assert main(["place", "conv_bn_relu", "--runs", "2", "--json"]) == 0
    assert ortlab.PlacementResult.from_json(capsys.readouterr().out).runs == 2
    assert main(["optimize", "conv_bn_relu", "--levels", "disabled,extended", "--rounds", "3",
                 "--runs", "3"]) == 0  # fmt: skip
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
