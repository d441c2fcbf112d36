"""Issue 63 item 1: a record that describes itself. Every measuring verb's result carries where
it was measured — the machine, the runtime and its settings, the model file, the inputs — in
its JSON (schema 2), and reads back as the same result with the same record. Each fact is
checked against an independent source: the file's own sha256, os.cpu_count, onnxruntime's
version, the environment."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ortlab
from ortlab.core.record import Provenance
from ortlab.core.result import Result

MLP = "mlp"
LLM = "tiny_llama_int4"

VERBS: dict[str, tuple[str, Callable[[ortlab.Model], Any]]] = {
    "benchmark": (MLP, lambda m: ortlab.benchmark(m, runs=5, progress=False)),
    "compare_configs": (
        MLP,
        lambda m: ortlab.compare_configs(m, [{}, {"level": "disabled"}], rounds=2, runs=2),
    ),
    "profile": (MLP, lambda m: ortlab.profile(m, runs=3, progress=False)),
    "placement": (MLP, lambda m: ortlab.placement(m, runs=2, progress=False)),
    "diverge": (MLP, lambda m: ortlab.diverge(m, {"level": "disabled"}, progress=False)),
    "cost": (MLP, lambda m: ortlab.cost(m, progress=False)),
    "optimization_diff": (
        MLP,
        lambda m: ortlab.optimization_diff(m, ("disabled", "all"), rounds=2, runs=2),
    ),
    "sweep": (LLM, lambda m: ortlab.sweep(m, dims={"prompt": [4, 8]}, runs=3, progress=False)),
    "generate": (LLM, lambda m: ortlab.generate(m, prompt=8, new_tokens=4, runs=2, progress=False)),
    "llm_bench": (
        LLM,
        lambda m: ortlab.llm_bench(
            m, prompt=(8,), new_tokens=(4,), repetitions=2, profile=False, progress=False
        ),
    ),
}


def _sha256(m: ortlab.Model) -> str:
    """The model file and the external data its tensors name, in name order."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    proto = onnx.load(str(m.path), load_external_data=False)
    names = {
        e.value for t in _get_all_tensors(proto) for e in t.external_data if e.key == "location"
    }
    digest = hashlib.sha256(m.path.read_bytes())
    for name in sorted(names):
        digest.update((m.path.parent / name).read_bytes())
    return digest.hexdigest()


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verbs_record_is_true_and_round_trips(
    verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime as ort

    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # a runtime variable: recorded
    monkeypatch.setenv("ORTLAB_UNRELATED_SETTING", "x")  # not one: left out
    name, call = VERBS[verb]
    m = ortlab.examples.load(name)
    r = call(m)
    assert isinstance(r, Result)
    p = r.provenance
    assert isinstance(p, Provenance) and p.verb == verb
    assert p.model is not None and p.model.sha256 == _sha256(m) and p.model.file == m.path.name
    assert p.model.size_bytes == m.disk_bytes
    record = json.dumps(json.loads(r.to_json())["record"])
    assert str(m.path.parent) not in record  # a record travels without the user's folders
    assert p.model.opsets == {o.domain or "ai.onnx": o.version for o in m.proto.opset_import}
    assert p.system.logical_cores == os.cpu_count() and p.system.memory_bytes > 0
    assert p.runtime.version == ort.__version__ and "CPUExecutionProvider" in (
        p.runtime.providers_in_build
    )
    assert p.runtime.environment.get("OMP_WAIT_POLICY") == "PASSIVE"
    assert "ORTLAB_UNRELATED_SETTING" not in p.runtime.environment
    config = getattr(r, "config", None)
    if isinstance(config, ortlab.SessionConfig):
        assert p.runtime.intra_op_threads == config.intra_op_threads
        assert p.runtime.spinning == config.spinning()
    text = r.to_json()
    envelope = json.loads(text)
    assert envelope["schema"] == 2 and envelope["record"]["model"]["sha256"] == _sha256(m)
    back = type(r).from_json(text)
    assert back.provenance == p
    assert back.to_json() == text  # the same result (NaN bounds compare unequal as objects)


def test_the_inputs_given_are_recorded() -> None:
    """Feeds are recorded by name as dtype[shape], dims as given; none given: empty (the
    result's own notes say what ortlab chose)."""
    m = ortlab.examples.load(MLP)
    feeds = m.example_inputs()
    b = ortlab.benchmark(m, feeds=feeds, runs=3, progress=False)
    assert b.provenance is not None
    assert b.provenance.inputs == {k: f"{v.dtype}{list(v.shape)}" for k, v in feeds.items()}
    llm = ortlab.examples.load(LLM)
    g = ortlab.benchmark(llm, dims={"prompt": 8, "past": 0}, runs=3, progress=False)
    assert g.provenance is not None and g.provenance.inputs == {"prompt": "8", "past": "0"}
    plain = ortlab.benchmark(m, runs=3, progress=False)
    assert plain.provenance is not None and plain.provenance.inputs == {}


def test_a_schema_1_result_still_reads_and_a_record_is_attached_once() -> None:
    """A result written before records (schema 1: no 'record') reads back with no record; a
    record, once attached, is the result's (a second is ignored)."""
    m = ortlab.examples.load(MLP)
    b = ortlab.benchmark(m, runs=3, progress=False)
    old = json.loads(b.to_json())
    old["schema"] = 1
    del old["record"]
    back = ortlab.BenchmarkResult.from_json(json.dumps(old))
    assert back == b and back.provenance is None
    first = b.provenance
    assert first is not None
    back.attach(first)
    other = Provenance(measured_at="x", verb="y", system=first.system, runtime=first.runtime)
    back.attach(other)
    assert back.provenance == first
    assert np.isfinite(b.stats.p50_ms)
