"""Loading ONNX models safely and summarising them.

``load()`` accepts a path, bytes or an ``onnx.ModelProto`` and never modifies or writes next to
the user's file. Weights are not read into memory (``load_external_data=False``) so models over
2 GB load by path; external data references are checked for existence, size and escape from the
model's folder before ORT ever sees them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from ortlab.core import cache
from ortlab.core.decoder import MODEL_FILES, DecoderInfo, decoder_file, detect_decoder
from ortlab.core.decoderinputs import decoder_feeds
from ortlab.core.errors import FeedError, InvalidModelError, UnsupportedModelError
from ortlab.core.externaldata import check_external_data, data_files, reject_external
from ortlab.core.folder import folder_line, folder_parts, part_file
from ortlab.core.graph import OpNode, graph_node_protos
from ortlab.core.inputs import example_inputs
from ortlab.core.layers import LayerMap, layer_map
from ortlab.core.onnx_util import (
    STANDARD_DOMAINS,
    dtype_name,
    graph_defects,
    non_utf8_text,
    subgraphs,
    tensor_nbytes,
    unseeded_random_ops,
    value_info_kind,
    value_info_shape,
    walk_initializers,
    walk_nodes,
)
from ortlab.core.result import Result, Table
from ortlab.core.runtime import limits
from ortlab.core.signature import Signature, TensorInfo
from ortlab.core.units import fmt_bytes

if TYPE_CHECKING:
    from ortlab.core.inputs import Feeds, FeedsLike

__all__ = [
    "Model",
    "ModelLike",
    "ModelSummary",
    "TensorInfo",
    "load",
]

_PROTO_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class ModelSummary(Result):
    """What a model is, read from the file alone (no ORT session).

    ``plot()``: the op-type histogram.
    """

    name: str
    path: str
    file_bytes: int
    ir_version: int
    opsets: dict[str, int]
    producer: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    initializer_count: int
    initializer_bytes: int
    external_data_bytes: int
    node_count: int
    """Nodes in the main graph."""
    node_count_total: int
    """Nodes including control-flow subgraphs (If/Loop/Scan bodies) and local functions."""
    subgraph_count: int
    op_types: dict[str, int]
    """op_type histogram over all nodes, subgraphs included, most frequent first."""
    initializers_as_inputs: int
    problems: list[str] = field(default_factory=list)
    """Why this onnxruntime cannot run the model, if it cannot (empty when it can)."""
    defects: list[str] = field(default_factory=list)
    """Those of ``problems`` that are defects of the graph itself (duplicate node names, a
    cycle): found once, here, and read by every ``check_runnable``."""
    folder: str = ""
    """For a folder of several models, each one's file and role (:mod:`ortlab.core.folder`):
    'a folder of 2 models: decoder.onnx (text decoder, loaded), encoder.onnx (…)'; else ''."""
    decoder: str = ""
    """For an LLM decoder with a KV cache, :meth:`DecoderInfo.line
    <ortlab.core.decoder.DecoderInfo.line>` ("decoder with KV cache: 2 layers, …"); else ''."""

    def __repr__(self) -> str:
        return (
            f"<Model {self.name!r}: IR {self.ir_version}, opset {self.opsets.get('', '?')}, "
            f"{self.node_count} nodes, {self.initializer_count} initializers "
            f"({fmt_bytes(self.initializer_bytes)}), inputs "
            + ", ".join(f"{i.name}:{i.dtype}{i.shape_text()}" for i in self.inputs[:4])
            + (" …" if len(self.inputs) > 4 else "")
            + ">"
        )

    def to_pandas(self) -> Table:
        """One row per graph input/output: role, name, dtype, shape."""
        import pandas as pd

        rows = [
            {"role": role, "name": t.name, "dtype": t.dtype, "shape": t.shape_text()}
            for role, items in (("input", self.inputs), ("output", self.outputs))
            for t in items
        ]
        return pd.DataFrame(rows, columns=["role", "name", "dtype", "shape"])


@dataclass(frozen=True, eq=False)
class Model:
    """A loaded ONNX model: its graph (weights not loaded), the file ORT runs, a summary."""

    proto: onnx.ModelProto = field(repr=False)
    path: Path
    """The file sessions are built from: the user's own file, or a copy in ortlab's cache."""
    source: str
    """'path', 'bytes', 'proto' or 'example:<name>'."""
    summary: ModelSummary = field(repr=False)
    variant: Any = field(default=None, repr=False)
    """For quantized/fp16 variants: an
    :class:`ortlab.analysis.quantization.quantize.VariantInfo` (how it was made)."""

    @property
    def name(self) -> str:
        return self.summary.name

    @property
    def inputs(self) -> list[TensorInfo]:
        return self.summary.inputs

    @property
    def signature(self) -> Signature:
        """What input synthesis reads of the model: its name, inputs and graph."""
        return Signature(self.name, self.inputs, self.proto)

    @property
    def outputs(self) -> list[TensorInfo]:
        return self.summary.outputs

    def __repr__(self) -> str:
        return repr(self.summary)

    def _repr_html_(self) -> str:
        return self.summary._repr_html_()

    @functools.cached_property
    def node_protos(self) -> tuple[tuple[OpNode, onnx.NodeProto], ...]:
        """Every node, If/Loop/Scan bodies included, as ortlab names them (see
        :func:`ortlab.core.graph.graph_node_protos`), each with its NodeProto. Walked once per
        Model: a Model's graph is never changed (sessions run its file), and a Lab refresh
        reads it twice (the join and the graph view), ~10 ms and ~3,500 objects each time on a
        1.5k-node model."""
        return tuple(graph_node_protos(self.proto.graph, subgraphs=True))

    @functools.cached_property
    def nodes(self) -> tuple[OpNode, ...]:
        """:attr:`node_protos` without the protos: the original nodes every join maps to."""
        return tuple(n for n, _ in self.node_protos)

    @functools.cached_property
    def random_ops(self) -> dict[str, int]:
        """Random ops without a seed, by op type ({} for most models): such a model's outputs
        differ from run to run, so ortlab compares it with a variant on copies whose random ops
        are seeded alike (:func:`random_note` says so)."""
        return unseeded_random_ops(self.proto.graph)

    def random_note(self) -> str:
        """'' for a model without unseeded random ops, else the sentence every accuracy figure
        of it carries."""
        if not self.random_ops:
            return ""
        ops = ", ".join(f"{op} ×{n}" if n > 1 else op for op, n in self.random_ops.items())
        return (
            f"{self.name!r} draws random numbers ({ops}, no seed): its outputs differ from run "
            "to run, so ortlab compared it with its variants on copies whose random ops are "
            "seeded by name: both draw the same numbers while the shapes they draw agree"
        )

    @functools.cached_property
    def decoder(self) -> DecoderInfo | None:
        """What makes this model an LLM decoder with a KV cache (layers, heads, head size, the
        past -> present pairs, …, and where each fact came from), or None for other models."""
        return detect_decoder(self.proto, self.path)

    @functools.cached_property
    def layers(self) -> LayerMap | None:
        """Each node's transformer layer read from the graph's structure (the cache it uses,
        the exporter's module path, the weights it reads, the residual stream;
        :mod:`ortlab.core.layers`), None for a model that is no decoder."""
        info = self.decoder
        if info is None:
            return None
        pairs = [
            (p.layer, p.past_key, p.past_value, p.present_key, p.present_value) for p in info.pairs
        ]  # a hybrid decoder's carried states mark their layers as a cache does
        pairs += [(st.layer, st.past, st.past, st.present, st.present) for st in info.states]
        return layer_map(self.proto.graph, pairs, info.layers)

    @property
    def disk_bytes(self) -> int:
        """What the model weighs on disk: its file and the external-data files it names (a
        variant's size beside its original's is this one number, external data included)."""
        files = [self.path, *data_files(self.proto, self.path.parent)]
        return sum(f.stat().st_size for f in files if f.exists())

    def fingerprint(self) -> str:
        """Identifies the model file's content for caches (path, size, mtime)."""
        st = self.path.stat()
        return f"{self.path.resolve()}:{st.st_size}:{st.st_mtime_ns}"

    def example_inputs(
        self,
        dims: Mapping[str, int] | None = None,
        seed: int = 0,
        *,
        like: FeedsLike | None = None,
        prompt: int | None = None,
        past: int | None = None,
        batch: int | None = None,
    ) -> Feeds:
        """Synthesized feeds for every graph input (see :func:`ortlab.core.inputs.example_inputs`);
        ``like=feeds`` makes them at those feeds' shapes. For an LLM decoder, inputs by role:
        ``example_inputs(prompt=32)`` is a prefill (nothing cached), ``example_inputs(prompt=1,
        past=32)`` a decode step (the same as ``dims={"prompt": 1, "past": 32}``)."""
        roles = {
            k: v for k, v in (("batch", batch), ("prompt", prompt), ("past", past)) if v is not None
        }
        if roles and self.decoder is None:
            raise FeedError(
                f"{', '.join(f'{k}=' for k in roles)}: {self.name} is not an LLM decoder with a KV "
                "cache (Model.decoder is None), so its inputs have no prompt or past. Give its "
                "symbolic dims by name instead, e.g. example_inputs(dims={'batch': 1}); "
                "Model.inputs lists them."
            )
        given = dict(dims or {})
        clash = [k for k in roles if given.get(k, roles[k]) != roles[k]]
        if clash:
            k = clash[0]
            raise FeedError(f"{k} is given twice, {given[k]} in dims= and {k}={roles[k]}: once.")
        if roles and like is not None:
            raise FeedError("like= makes inputs at the given feeds' shapes: no prompt=/past= too.")
        if self.decoder is not None and like is None:  # inputs by role: always valid
            return decoder_feeds(self.signature, self.decoder, {**given, **roles} or None, seed)
        return example_inputs(self.signature, dims=dims, seed=seed, like=like)

    def check_runnable(self, custom_ops_registered: bool = False) -> None:
        """Raise if this onnxruntime cannot run the model: :class:`InvalidModelError` for a
        malformed graph (duplicate node names, a cycle), :class:`UnsupportedModelError` for one
        too new or with unknown op domains.

        With ``custom_ops_registered`` (the config registers custom-op libraries) unknown op
        domains are left for ORT to resolve.
        """
        defects = self.summary.defects
        if defects:
            raise InvalidModelError(
                f"Model {self.name!r} is malformed and ORT would refuse it: " + " ".join(defects)
            )
        problems = [
            p for p in self.summary.problems if not (custom_ops_registered and "custom domain" in p)
        ]
        if problems:
            raise UnsupportedModelError(
                f"Model {self.name!r} cannot run on this onnxruntime: " + " ".join(problems)
            )


ModelLike = str | os.PathLike[str] | bytes | onnx.ModelProto | Model
"""What every verb takes as a model: a path, bytes, an onnx.ModelProto or a loaded Model."""


def load(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto | Model,
    *,
    name: str | None = None,
    part: str | None = None,
) -> Model:
    """Load an ONNX model from a path, bytes or a ModelProto, checking it on the way.

    A folder (onnxruntime-genai's, optimum's) loads its text decoder, and its summary names
    every model the folder holds with its role; ``part="encoder"`` (or "vision", "speech",
    "embedding", or a file name) loads another of them.

    Raises :class:`InvalidModelError` (or :class:`ExternalDataError`) naming the problem when the
    input is not a readable ONNX model. Models this onnxruntime cannot run still load (you can
    inspect them); ``summary.problems`` says why, and any run raises UnsupportedModelError.
    """
    if isinstance(model, Model):
        return model
    if isinstance(model, onnx.ModelProto):
        return _load_proto(model, name=name)
    if isinstance(model, bytes | bytearray | memoryview):
        data = bytes(model)
        proto = _parse(data, "the bytes given")
        reject_external(proto, "bytes")
        path = cache.content_path(data)
        return _finish(proto, path, "bytes", name or proto.graph.name or "model")
    if isinstance(model, str | os.PathLike):
        return _load_path(Path(model), name=name, part=part)
    raise TypeError(
        f"ortlab.load() takes a path, bytes or onnx.ModelProto, not {type(model).__name__}."
    )


def _load_path(path: Path, name: str | None, part: str | None = None) -> Model:
    path = path.absolute()  # the worker runs tools in a private cwd: relative paths would break
    if part is not None:  # another model of a folder
        return _with_folder(_load_path(part_file(path, part), name or f"{path.name}.{part}"), path)
    if _is_folder(path):  # an onnxruntime-genai or optimum folder: its model file
        found = decoder_file(path)
        if found is None:
            held = sorted(p.name for p in path.glob("*.onnx"))[:10]
            raise InvalidModelError(
                f"{path} is a folder, and neither an onnxruntime-genai folder (genai_config.json "
                f"naming its model) nor an optimum folder (config.json with one of "
                f"{', '.join(MODEL_FILES)}). It holds "
                + (f"these .onnx files: {', '.join(held)}" if held else "no .onnx file")
                + ": pass the .onnx file to load."
            )
        return _with_folder(_load_path(found, name or path.name), path)
    size, head = _read_head(path)
    _reject_other_formats(head, str(path))
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except DecodeError as err:
        raise InvalidModelError(_decode_message(str(path), size)) from err
    except (OSError, ValueError, onnx.checker.ValidationError) as err:
        raise InvalidModelError(f"{path} could not be read as ONNX: {err}") from err
    _check_is_model(proto, str(path))
    check_external_data(proto, path.parent)
    return _finish(proto, path, "path", name or path.stem)


def _with_folder(model: Model, folder: Path) -> Model:
    """``model`` with its summary naming the folder's models and their roles."""
    line = folder_line(folder_parts(folder, model.path), model.path.name)
    if line:
        object.__setattr__(model, "summary", dataclasses.replace(model.summary, folder=line))
    return model


def _is_folder(path: Path) -> bool:
    """Whether ``path`` is a folder (a path the system cannot even look up is not: reading it
    says why)."""
    try:
        return "\0" not in str(path) and path.is_dir()
    except (OSError, ValueError):
        return False


def _read_head(path: Path) -> tuple[int, bytes]:
    """The file's size and first bytes, or an InvalidModelError saying why it cannot be read."""
    try:
        if "\0" in str(path):  # Path.exists() would just say False
            raise ValueError("the path contains a NUL byte")
        exists, is_dir = path.exists(), path.is_dir()
        size = path.stat().st_size if exists and not is_dir else 0
        head = b""
        if exists and not is_dir and size:
            with path.open("rb") as fh:
                head = fh.read(8)
    except (OSError, ValueError) as err:  # permission denied, name too long, NUL in the path
        reason = getattr(err, "strerror", None) or str(err)
        raise InvalidModelError(
            f"Cannot read the model file {str(path)[:300]!r}: {reason}. Check the path and that "
            "you may read the file."
        ) from err
    if not exists:
        raise InvalidModelError(
            f"No model file at {path}: the path does not exist. "
            "Check the path, or use ortlab.examples.names() for the bundled models."
        )
    if is_dir:
        raise InvalidModelError(f"{path} is a folder, not an ONNX file; pass the .onnx file in it.")
    if size == 0:
        raise InvalidModelError(f"{path} is empty (0 bytes): not an ONNX model.")
    return size, head


def _load_proto(proto: onnx.ModelProto, name: str | None) -> Model:
    _check_is_model(proto, "the ModelProto given")
    if proto.ByteSize() > _PROTO_LIMIT:
        folder = cache.subdir("models") / f"proto-{id(proto):x}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "model.onnx"
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)  # save_model converts in place; never touch the caller's proto
        onnx.save_model(copy, str(path), save_as_external_data=True, location="model.onnx.data")
        reloaded = onnx.load(str(path), load_external_data=False)
        return _finish(reloaded, path, "proto", name or proto.graph.name or "model")
    reject_external(proto, "an in-memory ModelProto")
    data = proto.SerializeToString()
    path = cache.content_path(data)
    light = onnx.ModelProto()
    light.CopyFrom(proto)
    return _finish(light, path, "proto", name or proto.graph.name or "model")


def _reject_other_formats(head: bytes, where: str) -> None:
    if head.startswith(b"PK\x03\x04"):
        raise InvalidModelError(
            f"{where} is a zip archive, not an ONNX file (PyTorch .pt/.pth checkpoints are zips "
            "too). Extract the .onnx from it, or export the PyTorch model with torch.onnx.export."
        )
    if head.startswith(b"\x89HDF"):
        raise InvalidModelError(f"{where} is an HDF5 file (Keras?), not an ONNX file.")
    if head.startswith(b"TFL3", 4):
        raise InvalidModelError(f"{where} is a TensorFlow Lite model, not an ONNX file.")


def _decode_message(where: str, size: int) -> str:
    return (
        f"{where} is not a valid ONNX model: protobuf parsing failed ({size} bytes). The file "
        "is truncated (an interrupted download or copy?) or not an ONNX file at all. "
        'Re-download or re-export it; `python -c "import onnx; onnx.checker.check_model(PATH)"` '
        "gives ONNX's own view."
    )


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    if not data:
        raise InvalidModelError(f"{where} are empty: not an ONNX model.")
    _reject_other_formats(data[:8], where)
    try:
        proto = onnx.load_from_string(data)
    except DecodeError as err:
        raise InvalidModelError(_decode_message(where, len(data))) from err
    _check_is_model(proto, where)
    return proto


def _check_is_model(proto: onnx.ModelProto, where: str) -> None:
    if proto.ir_version <= 0 or not proto.HasField("graph"):
        missing = "ir_version" if proto.ir_version <= 0 else "graph"
        raise InvalidModelError(
            f"{where} parsed as protobuf but is not an ONNX model: it has no {missing}. "
            "Is it another protobuf file (a TensorProto .pb, a TensorFlow graph)?"
        )
    if not proto.opset_import:
        raise InvalidModelError(
            f"{where} has no opset_import: every ONNX model must declare its opset. "
            "Re-export the model, or set one with onnx.helper.make_opsetid('', 17)."
        )
    bad_text = non_utf8_text(proto)
    if bad_text:
        raise InvalidModelError(
            f"{where} is damaged: {bad_text} is not valid UTF-8 text, which ONNX requires of "
            "every name. Re-download or re-export the model."
        )


def _finish(proto: onnx.ModelProto, path: Path, source: str, name: str) -> Model:
    summary = summarize(proto, path, name)
    model = Model(proto=proto, path=path, source=source, summary=summary)
    if model.decoder is not None:  # said in one line wherever the model is described
        object.__setattr__(
            model, "summary", dataclasses.replace(summary, decoder=model.decoder.line())
        )
    return model


def summarize(proto: onnx.ModelProto, path: Path, name: str) -> ModelSummary:
    graph = proto.graph
    init_names = {t.name for t in graph.initializer}
    ops: Counter[str] = Counter()
    total = 0
    for node, _depth in walk_nodes(graph):
        ops[_op_key(node)] += 1
        total += 1
    for func in proto.functions:
        for fnode in func.node:
            ops[_op_key(fnode)] += 1
            total += 1
    inits = list(walk_initializers(graph))
    external = sum(tensor_nbytes(t) for t in inits if t.data_location == TensorProto.EXTERNAL)
    producer = " ".join(x for x in (proto.producer_name, proto.producer_version) if x)
    defects = graph_defects(graph)
    return ModelSummary(
        name=name,
        path=str(path),
        file_bytes=path.stat().st_size if path.exists() else 0,
        ir_version=int(proto.ir_version),
        opsets={o.domain: int(o.version) for o in proto.opset_import},
        producer=producer,
        inputs=[_tensor_info(v) for v in graph.input if v.name not in init_names],
        outputs=[_tensor_info(v) for v in graph.output],
        initializer_count=len(inits),
        initializer_bytes=sum(tensor_nbytes(t) for t in inits),
        external_data_bytes=external,
        node_count=len(graph.node),
        node_count_total=total,
        subgraph_count=sum(1 for n, _ in walk_nodes(graph) for _ in _subs(n)),
        op_types=dict(ops.most_common()),
        initializers_as_inputs=sum(1 for v in graph.input if v.name in init_names),
        problems=_problems(proto, defects),
        defects=defects,
    )


def _subs(node: onnx.NodeProto) -> list[onnx.GraphProto]:

    return list(subgraphs(node))


def _op_key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _tensor_info(vi: onnx.ValueInfoProto) -> TensorInfo:
    kind = value_info_kind(vi)
    if kind == "tensor_type":
        dtype = dtype_name(vi.type.tensor_type.elem_type)
    else:
        dtype = kind.removesuffix("_type")
    return TensorInfo(name=vi.name, dtype=dtype, shape=value_info_shape(vi), kind=kind)


def _problems(proto: onnx.ModelProto, defects: list[str]) -> list[str]:
    lim = limits()
    out = list(defects)
    if proto.ir_version > lim.max_ir_version:
        out.append(
            f"IR version {proto.ir_version} is newer than this onnxruntime {lim.ort_version} "
            f"supports (max {lim.max_ir_version}); upgrade onnxruntime or re-export with an "
            f"older onnx (onnx.helper.make_model(..., ir_version={lim.max_ir_version}))."
        )
    local_functions = {f.domain for f in proto.functions}
    for op in proto.opset_import:
        domain = op.domain or ""
        if domain in lim.max_opset and op.version > lim.max_opset[domain]:
            top = lim.max_opset[domain]
            default = domain in ("", "ai.onnx")
            fix = (  # the converter handles the ai.onnx domain only
                f"convert the model with onnx.version_converter.convert_version(model, {top})"
                if default
                else f"import {domain} at opset {top} if the model's ops allow it"
            )
            out.append(
                f"{'ai.onnx' if default else domain} opset {op.version} is newer than this "
                f"onnxruntime {lim.ort_version} supports (max {top}); upgrade onnxruntime or "
                f"{fix}."
            )
    used = {n.domain for n, _ in walk_nodes(proto.graph)}
    for domain in sorted(used - STANDARD_DOMAINS - local_functions - set(lim.max_opset)):
        example = next(n for n, _ in walk_nodes(proto.graph) if n.domain == domain)
        out.append(
            f"{f'Node {example.name!r}' if example.name else 'An unnamed node'} uses op "
            f"{example.op_type!r} from custom domain '{domain}', "
            "which this onnxruntime does not know. Register the custom-op library that "
            "implements it: SessionConfig(custom_op_libraries=['libmyops.so'])."
        )
    return out


def without_initializer_inputs(model: Model) -> Model:
    """A copy of ``model`` (in ortlab's cache) whose initializers are no longer graph inputs,
    so ORT may constant-fold and fuse them. The user's file is not touched."""
    if model.summary.external_data_bytes:
        raise UnsupportedModelError(
            f"{model.name!r} keeps its weights in external data files; rewrite it with "
            "onnx.save_model(..., save_as_external_data=True) after removing the initializers "
            "from graph.input yourself."
        )
    proto = onnx.load(str(model.path))
    names = {t.name for t in proto.graph.initializer}
    keep = [v for v in proto.graph.input if v.name not in names]
    del proto.graph.input[:]
    proto.graph.input.extend(keep)
    return load(proto, name=f"{model.name}-no-initializer-inputs")
