"""Issue 63 item 2: a spec and a runner, and the merge. ``ortlab run --example`` prints a spec
that runs as printed; each item is one record (the result with where it was measured); a
failed item is recorded as a failure while the rest go on; ``ortlab merge`` puts records of
two machines in the right cells, finds a planted slowdown with an interval that holds it, and
``--fail-on`` gates on it with an exit code."""

from __future__ import annotations

import json
import math
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

import ortlab
from ortlab.analysis.fleet.spec import EXAMPLE
from ortlab.cli import main


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example spec, printed by the CLI and run by it as printed."""
    root = tmp_path_factory.mktemp("fleet")
    spec = root / "spec.toml"
    spec.write_text(EXAMPLE, encoding="utf-8")
    assert main(["run", str(spec), "-o", str(root / "here")]) == 0
    return root / "here"


def test_the_example_spec_is_printed_and_runs_as_printed(
    records: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--example"]) == 0
    assert capsys.readouterr().out == EXAMPLE
    files = sorted(records.glob("*.json"))
    assert len(files) == 8  # 2 models x 2 verbs x 2 configs
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["ortlab"] in ("BenchmarkResult", "ProfileResult"), doc.get("error")
        assert doc["record"]["system"]["hostname"] == socket.gethostname()
        item = doc["item"]
        assert item["verb"] in ("benchmark", "profile") and item["config"] in ("all", "disabled")
        cls = getattr(ortlab, doc["ortlab"])
        result = cls.from_json(f.read_text())
        assert result.config.level == item["config"]  # the item's config is the one it ran
        if doc["ortlab"] == "BenchmarkResult":
            assert len(result.latencies_ns) == 30  # the spec's runs=30


def test_a_failed_item_is_recorded_and_the_rest_go_on(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[[models]]\nmodel = "mlp"\n[[verbs]]\nverb = "sweep"\n[[verbs]]\nverb = "benchmark"\n'
        "runs = 5\n",
        encoding="utf-8",
    )
    summary = ortlab.run_spec(ortlab.read_spec(spec, examples={"mlp"}), tmp_path / "out")
    assert summary.done == ["mlp · benchmark · default"]
    (failed,) = summary.failed
    assert failed == "mlp · sweep · default" and "dims" in summary.failed[failed]
    doc = json.loads((tmp_path / "out" / "mlp__sweep__default.json").read_text())
    assert doc["ortlab"] == "Failure" and doc["error"]["type"]
    assert "1 failed" in summary.text()


def _other_machine(records: Path, to: Path, *, host: str, slow: str, factor: float) -> None:
    """The records as another machine would write them: its hostname, and the item ``slow``
    ``factor`` times slower (every sample); the rest the same samples."""
    to.mkdir()
    for f in records.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["record"]["system"]["hostname"] = host
        if doc["item"]["key"] == slow:
            doc["data"]["latencies_ns"] = [int(x * factor) for x in doc["data"]["latencies_ns"]]
        (to / f.name).write_text(json.dumps(doc))


def test_merge_puts_machines_in_columns_and_finds_a_planted_slowdown(
    records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = "mlp · benchmark · all"
    _other_machine(records, tmp_path / "b", host="zz-other", slow=slow, factor=1.5)
    here = socket.gethostname()
    r = ortlab.merge([records, tmp_path / "b"], baseline=here)
    assert r.columns == sorted([here, "zz-other"]) and r.baseline == here
    assert r.records == 16 and len(r.rows) == 8
    for row in r.rows:
        base, other = row.cells[here], row.cells["zz-other"]
        assert base.samples == other.samples and not base.verdict
        if row.item == slow:
            assert other.ratio_low <= 1.5 <= other.ratio_high
            assert other.verdict.startswith("worse") and "independent runs" in other.verdict
            assert other.value == pytest.approx(1.5 * base.value, rel=0.01)
        else:
            assert other.verdict.startswith("no measurable difference"), (row.item, other)
    assert r.failures() == []
    gated = ortlab.merge([records, tmp_path / "b"], baseline=here, fail_on="p50 > 1.10x baseline")
    assert gated.failures() and all(slow in f for f in gated.failures())
    args = ["merge", str(records), str(tmp_path / "b"), "--baseline", here]
    assert main([*args, "--fail-on", "p50 > 1.10x baseline"]) == 1
    out = capsys.readouterr().out
    assert "beyond the gate" in out and "worse" in out
    assert main([*args, "--fail-on", "p50 > 2x baseline", "--html", str(tmp_path / "m.html")]) == 0
    assert "<table" in (tmp_path / "m.html").read_text()
    assert main([*args, "--fail-on", "p50 >> 2"]) == 2  # a gate it cannot read: what to write
    assert "FIGURE > Nx baseline" in capsys.readouterr().err
    back = ortlab.MergeResult.from_json(r.to_json())
    assert back.to_json() == r.to_json()
    assert r.plot() is not None and slow in r.to_text()


def test_merge_by_onnxruntime_version_and_a_failed_cell(records: Path, tmp_path: Path) -> None:
    b = tmp_path / "b"
    b.mkdir()
    for f in records.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["record"]["runtime"]["version"] = "9.9.9"
        if doc["item"]["key"] == "mlp · profile · all":
            doc = {"ortlab": "Failure", "schema": 2, "record": doc["record"], "item": doc["item"]}
            doc["error"] = {"type": "RunError", "message": "planted"}
        (b / f.name).write_text(json.dumps(doc))
    r = ortlab.merge([records, b], by="onnxruntime")
    import onnxruntime as ort

    assert r.columns == [f"onnxruntime {ort.__version__}", "onnxruntime 9.9.9"]
    (row,) = [x for x in r.rows if x.item == "mlp · profile · all"]
    cell: Any = row.cells["onnxruntime 9.9.9"]
    assert cell.failed == "RunError: planted" and math.isnan(cell.value)
    assert "failed: RunError: planted" in r.to_text()


def test_bad_specs_and_folders_say_what_to_write(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    for text, said in [
        ("[[verbs]]\nverb = 'benchmark'\n", "[[models]]"),
        ("[[models]]\nmodel = 'mlp'\n", "[[verbs]]"),
        ("[[models]]\nmodel = 'mlp'\n[[verbs]]\nverb = 'dance'\n", "none of"),
        ("[[models]]\nmodel = 'no_such'\n[[verbs]]\nverb = 'benchmark'\n", "bundled"),
        ("models = [", "not valid"),
    ]:
        bad.write_text(text)
        with pytest.raises(ortlab.OrtlabError, match=said.replace("[", r"\[")):
            ortlab.read_spec(bad, examples={"mlp"})
    with pytest.raises(ortlab.OrtlabError, match="no ortlab records"):
        ortlab.merge([tmp_path])
    shutil.rmtree(tmp_path)


def test_another_onnxruntimes_worker_serves_the_calling_thread_alone() -> None:
    """``ortlab run --onnxruntime`` puts another environment's worker in place for its items;
    a thread of its own (a Lab's job in the same kernel) keeps the default worker."""
    import sys
    import threading

    from ortlab.engine.worker import Worker, get_worker, serving, using

    other = Worker(sys.executable)  # never started: only which worker serves is asked
    seen: dict[str, object] = {}
    with using(other):
        t = threading.Thread(target=lambda: seen.update(thread=get_worker(), said=serving()))
        t.start()
        t.join()
        assert get_worker() is other and serving() == sys.executable
    assert seen["thread"] is not other and seen["said"] == ""
    assert get_worker() is not other and serving() == ""
