"""Per-node figures exported as Model Explorer's node-data JSON (issue 49 item 5): the values are
the graph view's, checked against independent sources — the time against the profile's own
per-run node total, the EP against the placement's rows, a divergence's error against its
tensors; keys are the model's node names under its graph's name; nothing is written for a
figure the results do not carry; and a hostile node name stays a JSON string."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.cli import main
from ortlab.core.errors import OptionError
from ortlab.views.modelexplorer import FIGURES


@pytest.fixture(scope="module")
def cnn_placement() -> tuple[ortlab.Model, ortlab.PlacementResult]:
    m = ortlab.examples.load("residual_cnn")
    return m, ortlab.placement(m, runs=5, progress=False)


def _results(path: Path, graph_id: str) -> dict[str, float | str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert list(data) == [graph_id]
    return {k: v["value"] for k, v in data[graph_id]["results"].items()}


def test_time_is_the_graphs_and_sums_to_the_profiles_node_time(
    cnn_placement: tuple[ortlab.Model, ortlab.PlacementResult], tmp_path: Path
) -> None:
    m, pl = cnn_placement
    out = ortlab.model_explorer_data(m, tmp_path / "time.json", placement=pl)
    values = _results(out.path, m.proto.graph.name)
    drawn = {n.name: n.us_per_run for n in ortlab.graph_data(m, placement=pl).nodes}
    assert values and all(values[k] == pytest.approx(drawn[k]) for k in values)
    assert set(values) <= {n.name for n in m.proto.graph.node}
    d = pl.profile.data  # the trace's own events: per node, its time in each run, median
    ids, run, _, dur = (np.asarray(a) for a in d.events)
    grid = np.zeros((len(d.node), int(run.max()) + 1))
    np.add.at(grid, (ids, run), dur)
    measured = sorted(set(run.tolist()))
    per_kernel = np.median(grid[:, measured], axis=1)  # no control flow in this model
    inserted = [k for k, op in enumerate(d.op_type) if op in ("ReorderInput", "ReorderOutput")]
    total = float(per_kernel.sum() - per_kernel[inserted].sum())  # kernels ORT added: no node
    assert sum(values.values()) == pytest.approx(total, abs=1.0)  # type: ignore[arg-type]
    assert out.nodes == len(values) and "µs per run" in str(out)
    gradient = json.loads(out.path.read_text())[m.proto.graph.name]["gradient"]
    assert gradient[0]["stop"] == 0 and gradient[-1]["stop"] == 1


def test_provider_is_the_placements(
    cnn_placement: tuple[ortlab.Model, ortlab.PlacementResult], tmp_path: Path
) -> None:
    m, pl = cnn_placement
    out = ortlab.model_explorer_data(m, tmp_path / "ep.json", "provider", placement=pl)
    values = _results(out.path, m.proto.graph.name)
    rows = {r.node: r.provider for r in pl.node_rows}
    assert values and all(values[k] == rows[k] for k in values)
    colours = json.loads(out.path.read_text())[m.proto.graph.name]["results"]
    assert {v["bgColor"] for v in colours.values()} == {"#4C78A8"}  # the CPU EP's, as drawn


def _pair(tmp: Path) -> tuple[Path, Path]:
    """x -> Add -> Relu -> Mul -> y, and a copy whose Mul constant is changed."""

    def build(scale: float, path: Path) -> Path:
        c = numpy_helper.from_array(np.full((1, 8), scale, np.float32), "c")
        b = numpy_helper.from_array(np.full((1, 8), 0.5, np.float32), "b")
        nodes = [
            helper.make_node("Add", ["x", "b"], ["t0"], name="add"),
            helper.make_node("Relu", ["t0"], ["t1"], name="<script>alert(1)</script>"),
            helper.make_node("Mul", ["t1", "c"], ["y"], name="mul"),
        ]
        g = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
            [c, b],
        )
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.save(model, path)
        return path

    return build(2.0, tmp / "a.onnx"), build(-2.0, tmp / "b.onnx")


def test_error_is_the_divergences_sqnr(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    dv = ortlab.diverge(a, b, progress=False)
    out = ortlab.model_explorer_data(a, tmp_path / "err.json", "error", error=dv)
    values = _results(out.path, "g")
    worst = {t.node: min(t.sqnr_db, 120.0) for t in dv.tensors}
    assert values == pytest.approx(worst)
    assert values["mul"] < 0 and values["add"] == 120.0  # the edited node, and an identical one
    assert "<script>alert(1)</script>" in values  # a name is data: JSON escapes it
    assert all(math.isfinite(v) for v in values.values())  # type: ignore[arg-type]


def test_the_shell_writes_it_beside_its_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _pair(tmp_path)
    out = tmp_path / "err.json"
    assert main(["diverge", str(a), "--against", str(b), "--model-explorer", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"{out}: Model Explorer node data for 3 nodes" in said and "SQNR" in said
    assert _results(out, "g")["mul"] < 0


def test_a_figure_the_results_do_not_carry_writes_nothing(tmp_path: Path) -> None:
    a, _ = _pair(tmp_path)
    with pytest.raises(OptionError, match="placement= or profile="):
        ortlab.model_explorer_data(a, tmp_path / "t.json")
    with pytest.raises(OptionError, match="choose one of"):
        ortlab.model_explorer_data(a, tmp_path / "t.json", "colour")
    assert not list(tmp_path.glob("*.json"))
    assert set(FIGURES) == {"time", "share", "provider", "error", "diff", "roofline"}
