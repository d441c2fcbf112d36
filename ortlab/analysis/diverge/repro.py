"""The first divergence as a bug report an ORT issue asks for: the node (with the producers of
its inputs the comparison did not see) alone from each side's model, its real inputs, and a
plain-onnxruntime script that exits 1 when the divergence reproduces and 0 when it does not
(Polygraphy's convention), printing the metric."""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import onnx
from onnx import helper

from ortlab.core.errors import OptionError
from ortlab.core.model import load
from ortlab.core.onnx_util import as_types, typed_inputs

if TYPE_CHECKING:
    import numpy as np

    from ortlab.analysis.diverge.types import ReproCase

__all__ = ["MAX_REGION", "Region", "input_dtypes", "region_alone", "write_repro"]

FILES = ("reference.onnx", "other.onnx", "inputs.npz", "repro.py")

_CHECK = """
inputs = dict(np.load(HERE / "inputs.npz"))
FLOATS = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}


def feeds(sess):  # the reference's values, each float cast to the type this side reads
    return {
        i.name: inputs[i.name].astype(FLOATS[i.type])
        if i.type in FLOATS and inputs[i.name].dtype.kind == "f"
        else inputs[i.name]
        for i in sess.get_inputs()
    }


a, b = reference_session(), other_session()
x = a.run(None, feeds(a))[0]
y = b.run(None, feeds(b))[0]
r, t = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
d = r - t
norm = float(np.sqrt(r @ r) * np.sqrt(t @ t))
cosine = float(r @ t) / norm if norm else (1.0 if not d.any() else 0.0)
max_abs = float(np.abs(d).max()) if d.size else 0.0
relative = float(np.sqrt(d @ d) / np.sqrt(r @ r)) if r.any() else float(d.any())
error = {"cosine": 1 - cosine, "max_abs": max_abs, "relative": relative}[METRIC]
print(f"cosine {cosine:.8f}, max abs {max_abs:.6g}, relative {relative:.6g}: {METRIC} error "
      f"{error:.6g} {'>' if error > THRESHOLD else '<='} threshold {THRESHOLD:g}")
sys.exit(1 if error > THRESHOLD else 0)
"""


def write_repro(case: ReproCase, folder: Path) -> Path:
    """Write the repro of ``case.first`` into ``folder`` (see the module); refuse to write
    over an earlier repro there."""
    first = case.first
    if not case.inputs:
        raise OptionError(
            "This result holds no inputs of its first divergent node (it was read back from "
            "JSON, which does not carry them): run ortlab.diverge again, then save_repro. "
            "Nothing was written."
        )
    there = [f for f in FILES if (folder / f).exists()]
    if there:
        raise OptionError(
            f"{folder} already holds a repro ({', '.join(there)}): nothing was written. "
            "Choose another folder."
        )
    import numpy as np

    arrays = {k: np.asarray(v) for k, v in case.inputs.items()}
    compared = case.compared
    made: dict[str, bytes] = {}
    for name, path in (
        ("reference.onnx", case.reference_path),
        ("other.onnx", case.other_path),
    ):
        region = region_alone(path, first.tensor, compared)
        made[name] = _typed(region.model, as_types(arrays, region.types))
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in made.items():
        (folder / name).write_bytes(data)
    with (folder / "inputs.npz").open("wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    script = folder / "repro.py"
    script.write_text(_script(case))
    return script


MAX_REGION = 16
"""The most nodes a first divergence's region holds (its node and the producers of inputs
that are not compared)."""


@dataclass(frozen=True)
class Region:
    """The nodes of one side's model that compute a tensor from tensors the comparison saw:
    its producer and, for each input that is neither compared (an integer tensor: a
    QuantizeLinear's int8) nor a graph input nor a weight, that input's producer, and so on
    back. Run on the reference's values of ``inputs``, it is the error those nodes introduce
    together: a DequantizeLinear alone on the reference's int8 only rescales it, the
    QuantizeLinear before it rounds."""

    model: bytes
    """The region as a model of its own: ``inputs`` in, the tensor out, its weights inside."""
    nodes: list[str]
    """Its nodes' names, in graph order (the tensor's producer last)."""
    inputs: list[str]
    types: dict[str, str] = field(default_factory=dict)
    """Each input's numpy dtype in this side's own model, where ONNX's type inference finds
    it: an fp16 model's region reads float16 where the reference computed float32, and is
    fed the reference's values cast to it."""


def region_alone(model_path: str, tensor: str, compared: Collection[str], hops: int = 0) -> Region:
    """The :class:`Region` of ``tensor`` in the model at ``model_path``; ``compared``: the
    tensors the comparison holds a value of (they bound it, as graph inputs do), except
    within ``hops`` nodes of ``tensor``'s producer, whose producers join it too (a fusion
    that needs them: a DequantizeLinear before a MatMul)."""
    m = load(model_path)
    graph = m.proto.graph
    producer = {o: n for n in graph.node for o in n.output if o}
    weights = {t.name: t for t in graph.initializer}
    bound = set(compared) | {i.name for i in graph.input}
    chosen: dict[int, onnx.NodeProto] = {}
    todo = [(producer[tensor], 0)]
    while todo and len(chosen) < MAX_REGION:
        node, depth = todo.pop(0)
        if id(node) in chosen:
            continue
        chosen[id(node)] = node
        todo += [
            (producer[i], depth + 1)
            for i in node.input
            if i in producer and i not in weights and (depth < hops or i not in bound)
        ]
    order = [n for n in graph.node if id(n) in chosen]
    made = {o for n in order for o in n.output}
    inputs = list(
        dict.fromkeys(i for n in order for i in n.input if i and i not in weights and i not in made)
    )
    g = helper.make_graph(
        order,
        f"{order[-1].name or order[-1].op_type}-alone",
        [helper.make_empty_tensor_value_info(i) for i in inputs],
        [helper.make_empty_tensor_value_info(tensor)],
        [weights[i] for i in dict.fromkeys(i for n in order for i in n.input) if i in weights],
    )
    model = helper.make_model(g, opset_imports=list(m.proto.opset_import))
    model.ir_version = m.proto.ir_version
    types = input_dtypes(model_path, inputs)
    return Region(bytes(model.SerializeToString()), [n.name for n in order], inputs, types)


def input_dtypes(model_path: str, names: Collection[str]) -> dict[str, str]:
    """The numpy dtype of each tensor in ``names`` as the model at ``model_path`` computes it
    (:func:`elem_types`); a tensor whose type cannot be inferred is left out."""
    stat = Path(model_path).stat()
    types = elem_types(model_path, stat.st_size, stat.st_mtime_ns)
    return {n: str(helper.tensor_dtype_to_np_dtype(types[n])) for n in names if types.get(n)}


@functools.lru_cache(maxsize=4)
def elem_types(model_path: str, size: int, mtime_ns: int) -> dict[str, int]:  # noqa: ARG001
    """Every tensor's ONNX element type in the model file (``size`` and ``mtime_ns`` key the
    cache: a bisection asks for each region's inputs, on both sides, many times): its graph's
    declared types, then ONNX's type inference over its weightless :func:`skeleton`."""
    from onnx import shape_inference

    from ortlab.engine.graphdims import skeleton

    proto = onnx.load(model_path, load_external_data=False)
    light = skeleton(proto)
    light.functions.extend(proto.functions)  # a dynamo export's local functions type its calls
    try:
        g = shape_inference.infer_shapes(light).graph
    except Exception:  # noqa: BLE001 - a graph ONNX cannot type: its declared types alone
        g = proto.graph
    return {
        vi.name: vi.type.tensor_type.elem_type
        for vi in [*proto.graph.input, *proto.graph.value_info, *g.value_info, *g.output]
    }


def _typed(model: bytes, arrays: dict[str, np.ndarray]) -> bytes:
    import onnx

    return bytes(typed_inputs(onnx.load_from_string(model), arrays).SerializeToString())


def _session(name: str, file: str, snippet: str) -> str:
    code = snippet.replace(repr(file), f"str(HERE / {file!r})")
    return f"def {name}():\n" + textwrap.indent(code.rstrip(), "    ") + "\n    return sess\n"


def _script(case: ReproCase) -> str:
    first = case.first
    head = (
        f'"""Reduced repro written by ortlab.diverge: node {first.node!r} ({first.op_type}) of '
        f"{case.model!r}\nrun alone on its real inputs, as {case.reference} and as "
        f"{case.other}.\nExits 1 when its output differs beyond the threshold, 0 when not."
        '"""\n'
    )
    return (
        head
        + "\nimport sys\nfrom pathlib import Path\n\nimport numpy as np\n\n"
        + "HERE = Path(__file__).resolve().parent\n"
        + f"METRIC = {case.metric!r}\nTHRESHOLD = {case.threshold!r}\n\n\n"
        + _session(
            "reference_session", "reference.onnx", case.reference_config.snippet("reference.onnx")
        )
        + "\n\n"
        + _session("other_session", "other.onnx", case.other_config.snippet("other.onnx"))
        + "\n"
        + _CHECK
    )
