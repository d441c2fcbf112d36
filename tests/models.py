"""The registry of tiny test models, built in code (one function per model)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def make(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto] | None = None,
    opset: int = 17,
    ir: int = 8,
    name: str = "g",
    extra_opsets: dict[str, int] | None = None,
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers or [])
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = ir
    return model


def vi(
    name: str, elem: int = F, shape: list[int | str | None] | None = None
) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape if shape is not None else [2, 3])


def add(shape: list[int | str | None] | None = None) -> onnx.ModelProto:
    """y = x + 1"""
    one = numpy_helper.from_array(np.ones([1], np.float32), "one")
    return make(
        [helper.make_node("Add", ["x", "one"], ["y"], name="add")],
        [vi("x", F, shape)],
        [vi("y", F, shape)],
        [one],
    )


def identity(elem: int, opset: int = 21, ir: int = 10) -> onnx.ModelProto:
    return make(
        [helper.make_node("Identity", ["x"], ["y"], name="id")],
        [vi("x", elem, ["batch", 4])],
        [vi("y", elem, ["batch", 4])],
        opset=opset,
        ir=ir,
    )


def opset_too_new(opset: int = 40) -> onnx.ModelProto:
    return make([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")], opset=opset, ir=10)


def ir_too_new(ir: int = 30) -> onnx.ModelProto:
    return make([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")], ir=ir)


def custom_domain() -> onnx.ModelProto:
    node = helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example.ops")
    return make([node], [vi("x")], [vi("y")], extra_opsets={"com.example.ops": 1})


def initializers_as_inputs(n: int = 5) -> onnx.ModelProto:
    """IR 8 model listing its weights as graph inputs: ORT will not fold them."""
    nodes, inits, inputs = [], [], [vi("x", F, [1, 8])]
    prev = "x"
    for i in range(n):
        w = numpy_helper.from_array(np.eye(8, dtype=np.float32), f"w{i}")
        inits.append(w)
        inputs.append(vi(f"w{i}", F, [8, 8]))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        prev = f"h{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return make(nodes, inputs, [vi("y", F, [1, 8])], inits)


def with_if() -> onnx.ModelProto:
    """An If whose branches hold nodes: op histograms must count them."""
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [], [vi("t")]
    )
    else_g = helper.make_graph(
        [
            helper.make_node("Neg", ["x"], ["e0"], name="else_neg"),
            helper.make_node("Abs", ["e0"], ["e"], name="else_abs"),
        ],
        "else",
        [],
        [vi("e")],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
        helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g),
    ]
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    return make(nodes, [vi("x")], [vi("y")], [zero])


def external_data(folder: Path, location: str = "weights.bin", write: bool = True) -> Path:
    """model.onnx in ``folder`` whose weight lives in an external file ``location``."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = numpy_helper.from_array(w, "w")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(w.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    model = make(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x")], [vi("y")], [tensor]
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    if write:
        (folder / location).write_bytes(w.tobytes())
    return path


def slow_loop() -> onnx.ModelProto:
    """A Loop with a huge trip count: runs for a very long time (for timeout tests)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one_b"], ["v_out"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in", F, [1])],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out", F, [1])],
        initializer=[numpy_helper.from_array(np.ones(1, np.float32), "one_b")],
    )
    inits = [
        numpy_helper.from_array(np.array(10**12, np.int64), "trip"),
        numpy_helper.from_array(np.array(True), "cond"),
    ]
    node = helper.make_node("Loop", ["trip", "cond", "x"], ["y"], name="loop", body=body)
    return make([node], [vi("x", F, [1])], [vi("y", F, [1])], inits)


def silu_cnn(channels: int = 16, seed: int = 0) -> onnx.ModelProto:
    """Conv + SiLU (Sigmoid, Mul) blocks with two heads, as Ultralytics exports them: at level
    'all' ORT turns the convolutions into one NCHWc chain (`<conv output>_nchwc` kernels,
    QuickGelu, ReorderInput/ReorderOutput) that ends in several ReorderOutput nodes."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    prev, c_in = "x", 3
    for i, name in enumerate(["stem", "b1", "b2", "head_a", "head_b"]):
        src = "b2_act" if name.startswith("head") else prev
        w = numpy_helper.from_array(
            (rng.standard_normal((channels, c_in if i == 0 else channels, 3, 3)) * 0.1).astype(
                np.float32
            ),
            f"/model.{i}/conv.weight",
        )
        inits.append(w)
        out = f"/model.{i}/conv/Conv_output_0"
        nodes.append(
            helper.make_node(
                "Conv", [src, w.name], [out], f"/model.{i}/conv/Conv", pads=[1, 1, 1, 1]
            )
        )
        sig = f"/model.{i}/act/Sigmoid_output_0"
        nodes.append(helper.make_node("Sigmoid", [out], [sig], f"/model.{i}/act/Sigmoid"))
        act = "b2_act" if name == "b2" else f"{name}_act"
        nodes.append(helper.make_node("Mul", [out, sig], [act], f"/model.{i}/act/Mul"))
        prev = act
    graph = helper.make_graph(
        nodes,
        "silu_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [
            helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
            for o in ("head_a_act", "head_b_act")
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def unet_block(channels: int = 32, groups: int = 8, seed: int = 0) -> onnx.ModelProto:
    """A diffusion UNet's block as exporters write it: a ResNet block (GroupNorm as a Reshape to
    [batch, groups, -1], InstanceNormalization, a Reshape back; SiLU; Conv), the timestep
    embedding (``timestep [steps]`` through a Linear, broadcast against the batch) added in, and
    self-attention over the H x W positions. Its inputs' dims are named as a UNet's: ``batch``,
    ``height``, ``width`` of the 4-channel latent and the timestep's ``steps`` (which its name
    would call a sequence)."""
    rng = np.random.default_rng(seed)
    c = channels

    def w(name: str, shape: tuple[int, ...]) -> str:
        inits.append(
            numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
        )
        return name

    def const(name: str, values: list[int]) -> str:
        inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    inits: list[Any] = []
    n = helper.make_node
    nodes = [
        n(
            "Conv",
            ["sample", w("conv_in.weight", (c, 4, 3, 3))],
            ["h0"],
            "/conv_in/Conv",
            pads=[1, 1, 1, 1],
        ),
        # GroupNorm: Reshape to [batch, groups, -1], InstanceNormalization, Reshape back
        n("Reshape", ["h0", const("gn.shape", [0, groups, -1])], ["g0"], "/norm1/Reshape"),
        n(
            "InstanceNormalization",
            ["g0", w("gn.scale", (groups,)), w("gn.bias", (groups,))],
            ["g1"],
            "/norm1/InstanceNormalization",
        ),
        n("Shape", ["h0"], ["h0_shape"], "/norm1/Shape"),
        n("Reshape", ["g1", "h0_shape"], ["g2"], "/norm1/Reshape_1"),
        n("Sigmoid", ["g2"], ["s0"], "/act/Sigmoid"),
        n("Mul", ["g2", "s0"], ["a0"], "/act/Mul"),
        n(
            "Conv",
            ["a0", w("conv1.weight", (c, c, 3, 3))],
            ["h1"],
            "/conv1/Conv",
            pads=[1, 1, 1, 1],
        ),
        # the timestep embedding: [steps] -> [steps, 1] -> Linear -> [steps, c, 1, 1]
        n("Unsqueeze", ["timestep", const("ax1", [1])], ["t0"], "/time_proj/Unsqueeze"),
        n("MatMul", ["t0", w("time_emb.weight", (1, c))], ["t1"], "/time_embedding/MatMul"),
        n("Unsqueeze", ["t1", const("ax23", [2, 3])], ["t2"], "/time_embedding/Unsqueeze"),
        n("Add", ["h1", "t2"], ["h2"], "/resnet/Add"),
        n("Add", ["h2", "h0"], ["h3"], "/resnet/Add_1"),
        # self-attention over the H*W positions
        n("Reshape", ["h3", const("attn.shape", [0, c, -1])], ["x0"], "/attn/Reshape"),
        n("Transpose", ["x0"], ["x1"], "/attn/Transpose", perm=[0, 2, 1]),
        n("MatMul", ["x1", w("q.weight", (c, c))], ["q"], "/attn/to_q/MatMul"),
        n("MatMul", ["x1", w("k.weight", (c, c))], ["k"], "/attn/to_k/MatMul"),
        n("MatMul", ["x1", w("v.weight", (c, c))], ["v"], "/attn/to_v/MatMul"),
        n("Transpose", ["k"], ["kt"], "/attn/Transpose_1", perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["scores"], "/attn/MatMul"),
        n("Softmax", ["scores"], ["probs"], "/attn/Softmax", axis=-1),
        n("MatMul", ["probs", "v"], ["o0"], "/attn/MatMul_1"),
        n("Transpose", ["o0"], ["o1"], "/attn/Transpose_2", perm=[0, 2, 1]),
        n("Shape", ["h3"], ["h3_shape"], "/attn/Shape"),
        n("Reshape", ["o1", "h3_shape"], ["o2"], "/attn/Reshape_1"),
        n("Add", ["o2", "h3"], ["out"], "/attn/Add"),
    ]
    graph = helper.make_graph(
        nodes,
        "unet_block",
        [
            helper.make_tensor_value_info(
                "sample", TensorProto.FLOAT, ["batch", 4, "height", "width"]
            ),
            helper.make_tensor_value_info("timestep", TensorProto.FLOAT, ["steps"]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def broadcast_chain(n: int = 10_000) -> onnx.ModelProto:
    """A flat chain of ``n`` Adds, every one also reading the same input ``bias``: the
    broadcast tensor that defeated the graph view's block cutter (issue 16)."""
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Add", [prev, "bias"], [f"t{i}"], name=f"add_{i}"))
        prev = f"t{i}"
    f = TensorProto.FLOAT
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", f, [4]), helper.make_tensor_value_info("bias", f, [4])],
        [helper.make_tensor_value_info(prev, f, [4])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def check_verdict(ratio: float, low: float, high: float, verdict: str) -> None:
    """A verdict sentence must agree with its own interval (a check that can fail, unlike
    "'faster' or 'slower' or 'no measurable difference' in verdict")."""
    from ortlab.core.stats import NOISE_BAND

    if "could not tell" in verdict:  # holds 1 and reaches a 2x change either way
        assert low <= 1 <= high and (low <= 0.5 or high >= 2), (verdict, low, high)
    elif "perhaps by no more than" in verdict:  # excludes 1, reaches into the noise band
        assert (high < 1 <= high + NOISE_BAND) or (low - NOISE_BAND <= 1 < low), verdict
        assert ("faster" in verdict) == (ratio < 1), verdict
    elif "faster" in verdict:
        assert high < 1 - NOISE_BAND and ratio < 1, (verdict, low, high)
    elif "slower" in verdict:
        assert low > 1 + NOISE_BAND and ratio > 1, (verdict, low, high)
    elif "no measurable difference" in verdict:  # only an interval that holds 1 says it
        assert low <= 1 <= high, (verdict, low, high)
    else:
        assert "not enough rounds" in verdict or verdict == "baseline", verdict
    if not np.isnan(low):  # an interval exists: it holds the point estimate
        assert low <= ratio <= high, (verdict, low, ratio, high)


@contextlib.contextmanager
def busy_core() -> Iterator[None]:
    """Another process burning a core for the duration: started detached (through ``sh``), as
    another user's job would be, so ortlab counts it as another process and not as part of
    the test's own process tree; in a session of its own (``setsid``), as another user's
    job is, so the scheduler's autogroups share the cores between it and this test's work
    as they would (in this test's session it took its fair share from the test's group
    only: a worker there got 1.3 cores, a Jupyter kernel's worker, in its own session, 1);
    running before the block starts."""
    spin = f"setsid {sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", spin], check=True, capture_output=True, text=True).stdout)
    try:
        time.sleep(0.3)  # the interpreter's start-up: burning by the time the block runs
        yield
    finally:
        os.kill(pid, signal.SIGKILL)


def facts_of(**kw: Any) -> Any:
    """The doctor's Facts from flat keywords, as a test writes them: those of the first stage
    go to its ``Observed`` (``profiled_ms`` defaults to ``baseline_ms``, which is the profiled
    median until the screen times the baseline), ``failures`` to what the stages said, the
    rest to Facts."""
    import dataclasses

    from ortlab.diagnosis.facts import Facts, Observed, Said, TransformerFusion

    seen = {f.name for f in dataclasses.fields(Observed)}
    observed = {k: v for k, v in kw.items() if k in seen}
    observed.setdefault("profiled_ms", kw.get("baseline_ms", 1.0))
    flat = ("baseline_ms", "failures", "attention_reason", "transformer_fused")
    rest = {k: v for k, v in kw.items() if k not in seen and k not in flat}
    said = Said(failures=tuple(kw.get("failures", ())))
    if "attention_reason" in kw or "transformer_fused" in kw:
        rest["fusion"] = TransformerFusion(
            kw.get("transformer_fused", {}), kw.get("attention_reason")
        )
    return Facts(seen=Observed(**observed), said=said, **rest)


def measured(
    key: str,
    ratio: float,
    low: float,
    high: float,
    *,
    stage: str = "screen",
    config: Any = None,
    cosine: float = float("nan"),
    p50: float = 10.0,
    variant: str = "original",
) -> Any:
    """A doctor's measured row as a test writes it: its ratio with an interval of 10 rounds
    (97.9 % coverage), from which the row derives whether it is significant."""
    from ortlab.core.config import SessionConfig
    from ortlab.core.stats import Paired
    from ortlab.diagnosis.facts import Measured

    return Measured(
        key=key,
        label=f"cpu · all · {key}",
        variant=variant,
        model_path="m.onnx",
        config=config or SessionConfig(),
        p50_ms=p50,
        paired=Paired(ratio, low, high, f"verdict of {key}", 10, 0.979),
        cosine=cosine,
        file_bytes=1000,
        stage=stage,
    )
