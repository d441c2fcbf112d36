"""Issue 63 item 5: a zoo and an upgrade. A spec over a folder of real models (a glob over
corpus models from public wheels) runs each item under two onnxruntime versions, each in its
own virtual environment built once from PyPI (as ``version_diff`` does); the records say the
version that really ran them, and ``ortlab merge --by onnxruntime`` ranks the regressions
with their intervals. The ranking is checked on the real records with slowdowns planted in
copies of them, and every ratio against a Hodges-Lehmann estimate computed here."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ortlab
from ortlab.cli import main
from ortlab.core.errors import OptionError
from ortlab.engine import venvs
from tests import corpus
from tests import pypi as pypi_env

pytestmark = [pytest.mark.slow, pytest.mark.pypi]

A, B = pypi_env.A, pypi_env.B
ZOO = ("magika", "slovorez_fp16", "silero_vad", "ppocrv4_det")
"""Real exports (Keras via tf2onnx, an fp16 model, If subgraphs with state, a Paddle
detector) that run at their guessed dims in well under a second each."""


@pytest.fixture(scope="module", autouse=True)
def venv_dir() -> Iterator[Path]:
    yield from pypi_env.venv_folder()


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The records of the zoo spec run by the CLI under both versions."""
    pypi_env.need(A, B)
    root = tmp_path_factory.mktemp("zoo")
    (root / "zoo").mkdir()
    for name in ZOO:
        (root / "zoo" / f"{name}.onnx").symlink_to(corpus.path(name))
    spec = root / "spec.toml"
    spec.write_text(
        '[[models]]\nmodel = "zoo/*.onnx"\n[[verbs]]\nverb = "benchmark"\nruns = 15\n',
        encoding="utf-8",
    )
    assert main(["run", str(spec), "-o", str(root / "records"), "--onnxruntime", f"{A},{B}"]) == 0
    return root / "records"


def _interpreter_version(version: str) -> str:
    python = venvs.interpreter(version)
    out = subprocess.run(
        [str(python), "-c", "import onnxruntime; print(onnxruntime.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_each_record_names_the_onnxruntime_that_ran_it(zoo: Path) -> None:
    docs = [json.loads(f.read_text()) for f in sorted(zoo.glob("*.json"))]
    assert len(docs) == 2 * len(ZOO)
    seen = set()
    for doc in docs:
        assert doc["ortlab"] == "BenchmarkResult", doc.get("error")
        wanted = doc["item"]["onnxruntime"]
        runtime = doc["record"]["runtime"]
        assert runtime["version"] == wanted and runtime["package"] == "onnxruntime"
        assert doc["record"]["model"]["sha256"]  # the file measured, by content
        seen.add((doc["item"]["model"], wanted))
    assert seen == {(m, v) for m in ZOO for v in (A, B)}
    # an independent reading: each environment's own interpreter imports that version
    assert _interpreter_version(A) == A and _interpreter_version(B) == B
    # the run stopped the versions' workers when it ended: no process of theirs is left
    import psutil

    def command(p: psutil.Process) -> str:
        try:
            return " ".join(p.cmdline())
        except psutil.Error:  # gone meanwhile, or a zombie
            return ""

    roots = {str(venvs.env_dir(v)) for v in (A, B)}
    children = psutil.Process().children(recursive=True)
    left = [p.pid for p in children if any(root in command(p) for root in roots)]
    assert left == [], left


def _hodges_lehmann(a: list[float], b: list[float]) -> float:
    """exp of the median of all pairwise log differences: the ratio of b to a."""
    la, lb = np.log(np.asarray(a)), np.log(np.asarray(b))
    return float(math.exp(np.median(lb[:, None] - la[None, :])))


def _samples(folder: Path, model: str, version: str) -> list[float]:
    for f in folder.glob("*.json"):
        doc = json.loads(f.read_text())
        if doc["item"]["model"] == model and doc["item"]["onnxruntime"] == version:
            return [x / 1e6 for x in doc["data"]["latencies_ns"]]
    raise AssertionError(f"no record of {model} under {version}")


def test_merge_by_version_gives_each_ratio_with_its_interval(zoo: Path) -> None:
    r = ortlab.merge([zoo], by="onnxruntime")
    assert r.columns == [f"onnxruntime {A}", f"onnxruntime {B}"] and r.baseline == r.columns[0]
    assert len(r.rows) == len(ZOO)
    for row in r.rows:
        model = row.item.split(" · ")[0]
        c = row.cells[f"onnxruntime {B}"]
        want = _hodges_lehmann(_samples(zoo, model, A), _samples(zoo, model, B))
        assert c.ratio == pytest.approx(want, rel=1e-9)
        assert c.ratio_low <= c.ratio <= c.ratio_high and c.samples == 15
        worse = c.ratio_low > 1 and c.ratio > 1 + 0.05
        assert c.verdict.startswith("worse") == worse, (row.item, c.verdict)
    listed = {(g.item, g.column) for g in r.regressions()}
    assert listed == {
        (row.item, col)
        for row in r.rows
        for col, c in row.cells.items()
        if c.verdict.startswith("worse")
    }


def test_planted_regressions_are_ranked_surest_first(
    zoo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The zoo's records copied with two slowdowns planted in the newer version's samples,
    each scaled so that the merged slowdown is what was planted (3x on magika, 1.5x on
    ppocrv4_det) whatever the real ratio was on this machine: the bigger one ranks first, each
    interval holds its planted slowdown, and the text and the CLI say them in that order."""
    wanted = {"magika": 3.0, "ppocrv4_det": 1.5}
    real = {row.item.split(" · ")[0]: row for row in ortlab.merge([zoo], by="onnxruntime").rows}
    factor = {m: x / real[m].cells[f"onnxruntime {B}"].ratio for m, x in wanted.items()}
    folder = tmp_path / "planted"
    folder.mkdir()
    for f in zoo.glob("*.json"):
        doc = json.loads(f.read_text())
        k = factor.get(doc["item"]["model"], 1.0) if doc["item"]["onnxruntime"] == B else 1.0
        doc["data"]["latencies_ns"] = [round(x * k) for x in doc["data"]["latencies_ns"]]
        (folder / f.name).write_text(json.dumps(doc))
    r = ortlab.merge([folder], by="onnxruntime")
    regs = r.regressions()
    order = [g.item.split(" · ")[0] for g in regs]
    # the larger planted slowdown ranks above the smaller (a real one may sit anywhere)
    assert order.index("magika") < order.index("ppocrv4_det"), [(g.item, g.low) for g in regs]
    assert [g.low for g in regs] == sorted((g.low for g in regs), reverse=True)
    for g in (g for g in regs if g.item.split(" · ")[0] in wanted):
        planted = wanted[g.item.split(" · ")[0]]
        assert g.slowdown == pytest.approx(planted, rel=1e-4)
        assert g.low <= planted <= g.high
    said = r.to_text().split("surest first", 1)[1]
    assert said.index(". magika ·") < said.index(". ppocrv4_det ·")
    assert main(["merge", str(folder), "--by", "onnxruntime", "--fail-on", "p50 > 1.3x"]) == 1
    out = capsys.readouterr().out
    assert "Regressions against onnxruntime 1.31.1, surest first" in out


def test_a_version_that_cannot_run_an_item_records_a_failure(tmp_path: Path) -> None:
    pypi_env.need(A)
    spec = tmp_path / "spec.toml"
    body = '[[models]]\nmodel = "mlp"\n[[verbs]]\nverb = "benchmark"\nruns = 5\n'
    spec.write_text('onnxruntime = ["not-a-version"]\n' + body, encoding="utf-8")
    with pytest.raises(OptionError, match="is no version"):
        ortlab.read_spec(spec, examples={"mlp"})
    spec.write_text('onnxruntime = ["here", "0.0.1"]\n' + body, encoding="utf-8")
    s = ortlab.run_spec(ortlab.read_spec(spec, examples={"mlp"}), tmp_path / "out")
    assert s.done == ["mlp · benchmark · default"]
    (failed,) = s.failed
    assert failed.endswith("onnxruntime 0.0.1") and "onnxruntime==0.0.1" in s.failed[failed]
    r = ortlab.merge([tmp_path / "out"], by="onnxruntime")
    (row,) = r.rows
    assert row.cells["onnxruntime 0.0.1"].failed.startswith("VersionInstallError")
