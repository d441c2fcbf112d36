"""``ortlab.llm_bench`` (issue 46 item 4): llama-bench's matrix — rows as it writes them, its
JSON field names, its statistics — and what the cells really ran, checked against the cache a
plain plan leaves (the formula's bytes at depth + test tokens) and the trace's own totals."""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

import ortlab
from ortlab.cli import main
from ortlab.cli.llmbench import UNMAPPED, int_list
from ortlab.core.errors import FeedError
from ortlab.engine.greedyloop import GreedyLoop
from ortlab.engine.tasks_bench import Cell

HERE = Path(ortlab.__file__).parent / "decoders"
LLAMA_BENCH_FIELDS = {
    "n_prompt",
    "n_gen",
    "n_depth",
    "n_threads",
    "n_batch",
    "avg_ts",
    "stddev_ts",
    "samples_ts",
    "samples_ns",
    "avg_ns",
    "stddev_ns",
    "model_filename",
    "model_n_params",
}


def test_the_matrix_is_llama_benchs() -> None:
    """pp rows have n_gen 0, tg rows n_prompt 0, one per depth, thread count and batch, in
    llama-bench's order (each setting's pp tests, then its tg tests); t/s
    is the mean of each repetition's tokens over its time, ± their sample standard
    deviation (llama-bench's stdev); the model's own run is inside each whole step."""
    r = ortlab.llm_bench(
        HERE / "genai_int4",
        prompt=(8, 16),
        new_tokens=(4,),
        depth=(0, 32),
        threads=(1,),
        repetitions=3,
        progress=False,
    )
    assert [row.label for row in r.rows] == [
        "pp8",
        "pp16",
        "tg4",
        "pp8 @ d32",
        "pp16 @ d32",
        "tg4 @ d32",
    ]
    for row in r.rows:
        assert (row.n_prompt == 0) != (row.n_gen == 0) and row.n_threads == 1
        assert len(row.samples_ns) == len(row.model_ns) == 3
        assert all(m <= s for m, s in zip(row.model_ns, row.samples_ns, strict=True))
        ts = [1e9 * (row.n_prompt or row.n_gen) / ns for ns in row.samples_ns]
        assert row.samples_ts == pytest.approx(ts)
        assert row.avg_ts == pytest.approx(statistics.fmean(ts))
        assert row.stddev_ts == pytest.approx(statistics.stdev(ts))
    records = json.loads(r.to_llama_bench("json"))
    assert set(records[0]) >= LLAMA_BENCH_FIELDS and len(records) == 6
    assert records[3]["n_depth"] == 32 and records[2]["n_prompt"] == 0
    assert [json.loads(x) for x in r.to_llama_bench("jsonl").splitlines()] == records
    md = r.to_llama_bench("md").splitlines()
    assert md[0] == "| model | size | params | backend | threads | n_batch | test | t/s |"
    assert "| pp8 @ d32 |" in md[5] and " ± " in md[5]
    assert r.to_llama_bench("csv").splitlines()[0].startswith("build_commit,")
    assert ortlab.LLMBenchResult.from_json(r.to_json()) == r
    assert "t/s (mean ± sd)" in r.to_text() and r.plot("pp") is not None and r.plot() is not None


@pytest.mark.parametrize(
    ("cell", "cached"),
    [
        (Cell(8, 0, 0, 1), 8),
        (Cell(8, 0, 32, 1), 40),
        (Cell(0, 4, 0, 1), 4),
        (Cell(0, 4, 32, 1), 36),
    ],
)
def test_a_cell_fills_the_cache_to_its_depth_first(cell: Cell, cached: int) -> None:
    """A cell's plan, run by the loop every cell runs, leaves depth + test tokens in the
    cache: the present outputs of its last step hold the formula's bytes for that many (plain
    onnxruntime session, optimum's Llama: the cache is passed present -> past)."""
    m = ortlab.load(HERE / "optimum_llama")
    d = m.decoder
    assert d is not None
    sess = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    plan, first = cell.plan(np.random.default_rng(0), int(d.vocab or 2))
    assert first == (1 if cell.n_depth else 0)
    assert sum(1 if p is None else p.shape[1] for p in plan[first:]) == cell.n_prompt + cell.n_gen

    job = SimpleNamespace(feeds={d.input_ids: plan[0]}, model_name=m.name, config=None)
    g = GreedyLoop(sess, d, job).run_steps(plan, lambda _k: None)  # type: ignore[arg-type]
    assert g.cache_bytes[-1] == d.kv_bytes_per_token * cached


def test_each_cells_split_adds_up_and_reads_layers_from_the_graph() -> None:
    """Every node of a cell's split has the layer the model's structure gives it; shares add
    up to 1; a tg cell's per-token split is not its pp cell's."""
    m = ortlab.load(HERE / "dynamo_llama" / "model.onnx")
    r = ortlab.llm_bench(m, prompt=(16,), new_tokens=(4,), repetitions=2, progress=False)
    layers = m.layers
    assert layers is not None
    for row in r.rows:
        assert row.split and sum(n.share for n in row.split) == pytest.approx(1.0)
        for n in row.split:
            assert n.layer == layers.of(n.node)
    t = r.by_layer()
    assert set(t["layer"]) == {-1, 0, 1}
    assert t.groupby("test")["share"].sum().tolist() == pytest.approx([1.0, 1.0])
    ops = r.by_op()
    assert "MatMul" in set(ops["op_type"])


def test_each_cells_weights_are_the_models_own_work_against_the_ceilings() -> None:
    """Issue 46 item 4, beyond llama-bench: each cell's weight multiplications against the
    ceilings. Independent of ortlab's counting: a pp cell's FLOPs are 2 x prompt x N x K over
    the file's MatMulNBits (their N and K attributes), a tg token's bytes at least their
    packed int4 weights (the initializers they read); achieved = work / the cell's own profiled
    time; the ceiling is what the cell's threads measured."""
    import onnx

    folder = HERE / "genai_int4"
    m = ortlab.load(folder)
    proto = onnx.load(str(m.path))
    inits = {t.name: t for t in proto.graph.initializer}
    mm = [n for n in proto.graph.node if n.op_type == "MatMulNBits"]
    nk = [({a.name: a.i for a in n.attribute}) for n in mm]
    packed = sum(
        len(inits[n.input[1]].raw_data) for n in mm if n.input[1] in inits
    )  # the int4 weights themselves
    r = ortlab.llm_bench(
        m, prompt=(32,), new_tokens=(8,), depth=(0, 64), repetitions=2, progress=False
    )
    w = r.weights
    assert len(w) == len(r.rows) == 4 and set(w["op_type"]) == {"MatMulNBits"}
    for row in w.itertuples():
        assert row.nodes == len(mm)
        cell = next(c for c in r.rows if c.label == row.test)
        assert cell.roof is not None
        us = sum(n.us for n in cell.split if n.op_type == "MatMulNBits")
        assert row.us_per_step == pytest.approx(us)
        if row.test.startswith("pp"):
            flops = sum(2 * 32 * a["N"] * a["K"] for a in nk)
            assert row.flops == pytest.approx(flops, rel=0.01)
            assert row.achieved_flops == pytest.approx(flops / us * 1e6, rel=0.01)
            assert row.fraction == pytest.approx(row.achieved_flops / row.peak_flops)
        else:
            assert packed <= row.bytes <= 2 * packed  # + scales, activations, outputs
            assert row.fraction == pytest.approx(row.achieved_bytes / row.bandwidth)
        assert r.peaks[row.n_threads]
    assert "Each test's weight multiplications against" in r.to_text()


def test_refusals_say_what_to_do() -> None:
    with pytest.raises(FeedError, match="not a decoder"):
        ortlab.llm_bench(ortlab.examples.load("mlp"), progress=False)
    with pytest.raises(FeedError, match="beyond the 512 tokens"):
        ortlab.llm_bench(HERE / "genai_int4", prompt=(256,), depth=(512,), progress=False)
    with pytest.raises(ValueError, match="repetitions"):
        ortlab.llm_bench(HERE / "genai_int4", repetitions=0, progress=False)


def test_llama_benchs_lists_and_ranges() -> None:
    assert int_list("128,512") == [128, 512]
    assert int_list("1-4") == [1, 2, 3, 4]
    assert int_list("1-8+3") == [1, 4, 7]
    assert int_list("128-1024*2") == [128, 256, 512, 1024]
    for bad in ("4-1", "1-8*1", "x", "0-4*2"):
        with pytest.raises(argparse.ArgumentTypeError):
            int_list(bad)


def test_the_cli_speaks_llama_benchs_grammar(capsys: Any) -> None:
    args = ["llm-bench", "tiny_llama_int4", "-p", "8", "-n", "2", "-d", "0,16"]
    assert main([*args, "-r", "2", "-t", "1", "-o", "jsonl", "--no-profile"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["n_prompt"], x["n_gen"], x["n_depth"]) for x in lines] == [
        (8, 0, 0),
        (0, 2, 0),
        (8, 0, 16),
        (0, 2, 16),
    ]
    assert all(x["n_threads"] == 1 and len(x["samples_ns"]) == 2 for x in lines)
    assert main([*args, "-r", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| model |") and "by layer" in out


def test_llama_benchs_pp_only_and_tg_only_lines_run_and_bad_ones_exit_2(capsys: Any) -> None:
    """llama-bench's own lines: '-n 0' is a pp-only run and '-p 0' a tg-only one (the README
    of llama.cpp's llama-bench uses both); both 0, or a negative count, is a refusal that
    exits 2 with what to pass, never 'a bug in ortlab'."""
    base = ["llm-bench", "tiny_llama_int4", "-r", "2", "-t", "1", "-o", "jsonl", "--no-profile"]
    assert main([*base, "-p", "8", "-n", "0"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["n_prompt"], x["n_gen"]) for x in lines] == [(8, 0)]
    assert main([*base, "-p", "0", "-n", "2"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["n_prompt"], x["n_gen"]) for x in lines] == [(0, 2)]
    assert main([*base, "-p", "0", "-n", "0"]) == 2
    err = capsys.readouterr().err
    assert "nothing to test" in err and "-p 512" in err and "a bug" not in err
    assert main([*base, "-b", "0"]) == 2
    assert "batch must be" in capsys.readouterr().err


def test_the_generate_tab_carries_the_matrix(tmp_path: Path) -> None:
    """A decoder's Lab runs llama-bench's matrix from the Generate tab: pp and tg at the
    prompt and new-token boxes, at each depth of the depths box; shown with its figure, and
    kept under the next generation."""
    lab = ortlab.Lab(ortlab.examples.load("tiny_llama_int4"), synchronous=True, runs=3)
    t = lab.tab_controls
    t.gen_prompt.value, t.gen_new.value, t.bench_depths.value = 16, 4, "64, 0"
    t.bench_button.click()
    r = lab.llm_bench
    assert isinstance(r, ortlab.LLMBenchResult) and lab.error.value == ""
    assert [row.label for row in r.rows] == ["pp16", "tg4", "pp16 @ d64", "tg4 @ d64"]
    assert r in lab.shown["Generate"]
    t.gen_button.click()
    assert lab.generation is not None and lab.shown["Generate"][-1] is r
    t.bench_depths.value = "0,x"
    t.bench_button.click()
    said = lab.tab_controls.status["Generate"].error.value
    assert "depths: &#x27;x&#x27;: give counts or ranges" in said, said
    # the report carries the tab's generation and its matrix (headline, table, weights)
    text = Path(lab.export_report(tmp_path / "r.html")).read_text(encoding="utf-8")
    assert "pp16 @ d64" in text and "Each test&#x27;s weight multiplications" in text
    assert "TTFT" in text


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


@pytest.mark.slow
def test_llama_benchs_documented_example_lines_run(capsys: Any, tmp_path: Path) -> None:
    """The example lines of llama-bench's README (tools/llama-bench), each with ortlab's
    models for its ``-m`` (two bundled decoders long enough for its 1024-token prompt) and
    ``-r 2 --no-profile -o jsonl`` added to read the rows; each row is the cell llama-bench
    runs for that line, in its order (every setting's pp, then tg, then pg tests)."""
    two = ["-m", "tiny_gemma2_int4", "-m", "tiny_gptoss_fp32"]
    tail = ["-r", "2", "--no-profile", "-o", "jsonl"]

    def run(*line: str) -> list[dict[str, Any]]:
        assert main(["llm-bench", *line, *tail]) == 0
        return _lines(capsys.readouterr().out)

    # Prompt processing and text generation: -p 0 -n 0 -pg 100,100 -pg 500,100
    rows = run(*two, "-p", "0", "-n", "0", "-pg", "100,100", "-pg", "500,100")
    assert [(x["model_filename"], x["n_prompt"], x["n_gen"]) for x in rows] == [
        ("tiny_gemma2_int4", 100, 100),
        ("tiny_gemma2_int4", 500, 100),
        ("tiny_gptoss_fp32", 100, 100),
        ("tiny_gptoss_fp32", 500, 100),
    ]
    for x in rows:  # a pp+tg test's t/s counts the prompt and the generated tokens
        ts = [1e9 * (x["n_prompt"] + x["n_gen"]) / ns for ns in x["samples_ns"]]
        assert x["samples_ts"] == pytest.approx(ts)
    # Text generation with different models: -p 0 -n 128,256,512
    rows = run(*two, "-p", "0", "-n", "128,256,512")
    assert [(x["model_filename"], x["n_prompt"], x["n_gen"]) for x in rows] == [
        (m, 0, n) for m in ("tiny_gemma2_int4", "tiny_gptoss_fp32") for n in (128, 256, 512)
    ]
    # Prompt processing with different batch sizes: -n 0 -p 1024 -b 128,256,512,1024
    rows = run("-m", "tiny_gemma2_int4", "-n", "0", "-p", "1024", "-b", "128,256,512,1024")
    assert [(x["n_prompt"], x["n_gen"], x["n_batch"], x["n_ubatch"]) for x in rows] == [
        (1024, 0, b, 512) for b in (128, 256, 512, 1024)
    ]
    # Different numbers of threads: -n 0 -n 16 -p 64 -t 1,2,4,8,16,32
    rows = run("-m", "tiny_gemma2_int4", "-n", "0", "-n", "16", "-p", "64", "-t", "1,2,4,8,16,32")
    assert [(x["n_threads"], x["n_prompt"], x["n_gen"]) for x in rows] == [
        (t, p, n) for t in (1, 2, 4, 8, 16, 32) for p, n in ((64, 0), (0, 16))
    ]
    # Different prefilled context: -d 0,512 (the default -p 512 -n 128 at each depth)
    rows = run("-m", "tiny_gemma2_int4", "-d", "0,512")
    assert [(x["n_depth"], x["n_prompt"], x["n_gen"]) for x in rows] == [
        (0, 512, 0),
        (0, 0, 128),
        (512, 512, 0),
        (512, 0, 128),
    ]
    # Output formats: -o md, csv, json, jsonl, sql (sql read back by sqlite3)
    base = ["llm-bench", "tiny_gemma2_int4", "-p", "16", "-n", "4", "-r", "2", "--no-profile"]
    for fmt in ("md", "csv", "json", "jsonl", "sql"):
        assert main([*base, "-o", fmt]) == 0
        out = capsys.readouterr().out
        if fmt == "sql":
            db = sqlite3.connect(tmp_path / "bench.db")
            db.executescript(out)
            got = db.execute("SELECT n_prompt, n_gen, avg_ts > 0 FROM test").fetchall()
            assert got == [(16, 0, 1), (0, 4, 1)]
        elif fmt == "md":
            assert out.splitlines()[0].startswith("| model | size | params | backend |")
        elif fmt == "csv":
            assert len(out.splitlines()) == 3
        else:
            assert len(json.loads(out) if fmt == "json" else _lines(out)) == 2
    # Different numbers of layers offloaded to the GPU: -ngl 10,20,...: no such thing here
    assert main(["llm-bench", "tiny_gemma2_int4", "-ngl", "10,20,30,31,32,33,34,35"]) == 2
    err = capsys.readouterr().err
    assert "-ngl" in err and "--providers" in err and "a bug" not in err


def test_a_prompt_is_fed_in_steps_of_the_smaller_batch() -> None:
    """llama-bench splits a prompt by its logical and physical batch (-b, -ub): a cell's
    plan feeds min(n_batch, n_ubatch) tokens a step, the last step the rest, and the ids
    are the same as one step's (the chunks are the prompt, in order)."""
    rng = np.random.default_rng(0)
    whole, _ = Cell(1000, 0, 0, 1, 2048, 2048).plan(np.random.default_rng(0), 50)
    for b, ub, sizes in [(2048, 512, [512, 488]), (128, 512, [128] * 7 + [104])]:
        plan, first = Cell(1000, 0, 0, 1, b, ub).plan(np.random.default_rng(0), 50)
        assert first == 0 and [p.shape[1] for p in plan if p is not None] == sizes
        joined = np.concatenate([p for p in plan if p is not None], axis=1)
        assert np.array_equal(joined, whole[0])
    plan, first = Cell(64, 16, 100, 2, 32, 512).plan(rng, 50)  # pp64+tg16 after 100 cached
    shapes = [None if p is None else p.shape for p in plan]
    assert first == 4 and shapes == [(2, 32)] * 3 + [(2, 4)] + [(2, 32)] * 2 + [None] * 16


def test_refused_llama_bench_flags_say_what_to_pass(capsys: Any) -> None:
    """Every llama-bench flag without an ONNX Runtime meaning exits 2 with the reason and
    what ortlab takes instead; none reaches the model."""
    for flags, why in UNMAPPED.items():
        for flag in flags:
            assert main(["llm-bench", "no-such-model", flag, "1"]) == 2, flag
            err = capsys.readouterr().err
            assert f"{flag}: {why}." in err and "a bug" not in err
