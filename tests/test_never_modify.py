"""Models are never modified or written next to (ARCHITECTURE.md, "Key choices").

Every public operation that takes a model path runs on a copy in a folder of its own (with
external data where the operation supports it). The test records every file's sha256, size and
mtime and the folder listing before, and asserts after that nothing changed and that nothing
appeared in that folder or in the working directory, which is an empty folder for this module,
for the worker process too (it is restarted there).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

import ortlab
from ortlab.analysis.graph.data import graph_data
from ortlab.cli import main
from ortlab.engine.worker import get_worker

MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": ortlab.examples.mlp,
    "conv_bn_relu": ortlab.examples.conv_bn_relu,
    "bert_tiny": ortlab.examples.bert_tiny,
}


@pytest.fixture(scope="module")
def cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An empty working directory for the whole module, the worker's included."""
    folder = tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        get_worker().stop()  # the next call starts a worker in this directory
        yield folder
        get_worker().stop()  # later modules get a worker in their own directory again


def _copy(folder: Path, name: str, external: bool) -> Path:
    folder.mkdir()
    path = folder / f"{name}.onnx"
    proto = MODELS[name]()
    if external:
        onnx.save(
            proto,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=f"{name}.onnx.data",
            size_threshold=0,
        )
        assert (folder / f"{name}.onnx.data").stat().st_size > 0
    else:
        onnx.save(proto, str(path))
    return path


def _state(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under ``folder``: relative path -> (sha256, size, mtime_ns)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[str(p.relative_to(folder))] = (digest, st.st_size, st.st_mtime_ns)
    return out


def _cli(*args: str) -> None:
    assert main(list(args)) == 0


Op = Callable[[Path, Path], Any]
"""(model path, a scratch folder for outputs the caller asks for) -> result."""


def _summary(path: Path, _out: Path) -> Any:
    model = ortlab.load(path)
    assert "input_ids" in model.summary.to_text()
    return model.example_inputs(dims={"sequence": 8})


def _quantize_external(path: Path, _out: Path) -> None:
    q = ortlab.quantize(path, mode="dynamic")  # its weights beside it, in ortlab's cache
    assert q.path.with_name(q.path.name + ".data").exists()


def _dynamic(path: Path) -> ortlab.Model:
    return ortlab.quantize(path, mode="dynamic")


OPS: dict[str, tuple[str, bool, Op]] = {
    "load": ("mlp", True, lambda p, _: ortlab.load(p)),
    "summary-example_inputs": ("bert_tiny", True, _summary),
    "benchmark": (
        "conv_bn_relu",
        True,
        lambda p, _: ortlab.benchmark(p, runs=2, warmup=1, progress=False),
    ),
    "profile": ("mlp", True, lambda p, _: ortlab.profile(p, runs=2, warmup=1, progress=False)),
    "placement": (
        "conv_bn_relu",
        True,
        lambda p, _: ortlab.placement(p, runs=2, warmup=1, progress=False),
    ),
    "optimization_diff": (
        "conv_bn_relu",
        True,
        lambda p, _: ortlab.optimization_diff(
            p, levels=["disabled", "all"], rounds=1, runs=1, progress=False
        ),
    ),
    "quantize-dynamic": ("mlp", False, lambda p, _: _dynamic(p)),
    "quantize-external": ("mlp", True, _quantize_external),
    "to_fp16": ("mlp", False, lambda p, _: ortlab.to_fp16(p)),
    "compare": ("mlp", False, lambda p, _: ortlab.compare(p, [_dynamic(p)], rounds=1, runs=1)),
    "quantization_error": (
        "mlp",
        False,
        lambda p, _: ortlab.quantization_error(p, _dynamic(p), limit=2),
    ),
    "transformer_optimize": ("bert_tiny", False, lambda p, _: ortlab.transformer_optimize(p)),
    "graph_data": ("bert_tiny", True, lambda p, _: graph_data(p)),
    "graph-to_html": (
        "conv_bn_relu",
        True,
        lambda p, out: ortlab.graph(p).to_html(out / "view.html"),  # type: ignore[attr-defined]
    ),
    "cli-inspect": ("bert_tiny", True, lambda p, _: _cli("inspect", str(p), "--json")),
    "cli-bench": ("mlp", True, lambda p, _: _cli("bench", str(p), "--runs", "2", "--warmup", "1")),
    "cli-profile": (
        "mlp",
        True,
        lambda p, _: _cli("profile", str(p), "--runs", "2", "--warmup", "1"),
    ),
    "cli-place": ("conv_bn_relu", True, lambda p, _: _cli("place", str(p), "--runs", "2")),
    "cli-optimize": (
        "conv_bn_relu",
        True,
        lambda p, _: _cli("optimize", str(p), "--levels", "disabled,all", "--no-timing"),
    ),
}


@pytest.mark.parametrize("op", list(OPS))
def test_operation_leaves_the_model_folder_and_cwd_alone(
    op: str, cwd: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, external, run = OPS[op]
    path = _copy(tmp_path / "model", name, external)
    out = tmp_path / "out"
    out.mkdir()
    before = _state(path.parent)
    assert list(cwd.iterdir()) == []
    run(path, out)
    capsys.readouterr()  # the CLI's tables
    assert _state(path.parent) == before, f"{op} changed or added files next to the model"
    assert list(cwd.iterdir()) == [], f"{op} wrote to the working directory"
    if op == "graph-to_html":
        assert [p.name for p in out.iterdir()] == ["view.html"], "only the file asked for"
    else:
        assert list(out.iterdir()) == []
