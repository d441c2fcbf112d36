"""Where the quantization error is: SQNR of every float tensor a variant still computes under
the original name, keyed by the original node (the graph view colours by it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ortlab.analysis.graph.mapping import graph_nodes
from ortlab.analysis.quantization.quantize import Calibration, SavedCalibration, calibration_data
from ortlab.core.feedcheck import validate_feeds
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.onnx_util import inferred_graph
from ortlab.core.result import Result, Table
from ortlab.core.run import Run
from ortlab.engine import tasks_transform
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task

if TYPE_CHECKING:
    import onnx

    from ortlab.core.graph import OpNode
    from ortlab.core.inputs import FeedsLike

__all__ = [
    "ErrorResult",
    "QuantFix",
    "TensorError",
    "quantization_error",
    "quantization_error_run",
]


@dataclass(frozen=True)
class TensorError:
    tensor: str
    node: str
    op_type: str
    sqnr_db: float
    cosine: float
    max_abs: float


@dataclass(frozen=True)
class ErrorResult(Result):
    """Per-tensor error between a float model and a variant, mapped to the original nodes."""

    model: str
    variant: str
    tensors: list[TensorError]
    samples: str
    synthetic: bool
    skipped: list[str] = field(default_factory=list)
    """Original tensors the variant no longer computes as such (e.g. a Relu folded into the
    Conv before it, with no QuantizeLinear/DequantizeLinear pair to read the value from)."""
    model_path: str = ""
    """The float model (what :meth:`fix` re-quantizes)."""
    settings: dict[str, object] = field(default_factory=dict)
    """The variant's :class:`QuantConfig` as its JSON settings (``QuantConfig.settings()``)
    when ortlab.quantize made it; {} otherwise."""
    calibration: dict[str, Any] = field(default_factory=dict)
    """Where the variant's calibration samples are (path, source, synthetic): :meth:`fix`
    calibrates its variants with exactly those; {} when it needed none or ortlab did not
    make it."""
    notes: list[str] = field(default_factory=list)
    """How the figures were made where it is not plain (a model drawing random numbers)."""

    def fix(self, n: int = 5, *, promote: bool = True, timeout: float | None = None) -> QuantFix:
        """Variants that spare the ``n`` worst nodes (lowest SQNR at their outputs): one with
        those nodes left in float (``nodes_to_exclude``), and for static QDQ one with their
        output tensors quantized to 16 bits instead of 8. Compare them with the float model
        and the full variant: ``ortlab.compare(m, [q, *fix.variants])``."""
        from ortlab.analysis.quantization.quantize import quantize
        from ortlab.core.quantconfig import QuantConfig

        if not self.settings or not self.model_path:
            raise ValueError(
                "fix() re-quantizes with the variant's own settings, which this result does "
                "not know (the variant was not made by ortlab.quantize): quantize with "
                "ortlab.quantize(m, ...) and measure quantization_error(m, q) again."
            )
        worst = self.worst(len(self.tensors))
        nodes = list(dict.fromkeys(worst["node"]))[:n]
        tensors = worst[worst["node"].isin(nodes)]["tensor"].tolist()
        base = QuantConfig.from_settings(self.settings)
        if base.mode == "static":
            if not self.calibration:
                raise ValueError(
                    "fix() calibrates its variants with the samples the variant was calibrated "
                    "with, and this variant's are not in ortlab's cache (made before this "
                    "version, or the cache was cleared): quantize again with ortlab.quantize "
                    "and measure quantization_error(m, q) again."
                )
            base = dataclasses.replace(base, calibration=SavedCalibration(**self.calibration))
        spared = tuple(sorted({*base.nodes_to_exclude, *nodes}))
        source = load(self.model_path, name=self.model)  # the model's name, not its file's
        variants = [
            quantize(source, dataclasses.replace(base, nodes_to_exclude=spared), timeout=timeout)
        ]
        if promote and base.mode == "static" and base.format == "qdq":
            wide = tuple(sorted(tensors))
            wider = dataclasses.replace(base, promote_16bit=wide)
            variants.append(quantize(source, wider, timeout=timeout))
        return QuantFix(nodes=nodes, tensors=tensors, variants=variants)

    def to_pandas(self) -> Table:
        """tensor, node, op_type, sqnr_db, cosine, max_abs — in graph order."""
        import pandas as pd

        return pd.DataFrame(
            [t.__dict__ for t in self.tensors],
            columns=["tensor", "node", "op_type", "sqnr_db", "cosine", "max_abs"],
        )

    def worst(self, n: int = 10) -> Table:
        """The ``n`` tensors with the lowest SQNR."""
        return self.to_pandas().sort_values("sqnr_db").head(n).reset_index(drop=True)

    @property
    def nodes(self) -> Table:
        """Per node (same key as the placement join): node, op_type, sqnr_db (worst output)."""
        t = self.to_pandas()
        return t.groupby(["node", "op_type"], as_index=False)["sqnr_db"].min()

    def __repr__(self) -> str:
        worst = min(self.tensors, key=lambda t: t.sqnr_db) if self.tensors else None
        where = (
            f"; worst {worst.node!r} ({worst.op_type}) at {worst.sqnr_db:.1f} dB" if worst else ""
        )
        mark = " (SYNTHETIC inputs)" if self.synthetic else ""
        head = f"<ErrorResult {self.model!r} vs {self.variant!r}: {len(self.tensors)} tensors"
        return f"{head}{where}{mark}>"


@dataclass(frozen=True)
class QuantFix:
    """The worst nodes of a quantization error and the variants that spare them."""

    nodes: list[str]
    tensors: list[str]
    variants: list[Any]
    """Models: the worst nodes left in float; (static QDQ) their outputs at 16 bits."""

    def __repr__(self) -> str:
        names = ", ".join(v.variant.label if v.variant else v.name for v in self.variants)
        return f"<QuantFix: {len(self.nodes)} worst nodes {self.nodes[:3]}…; variants: {names}>"


def quantization_error(
    model: ModelLike,
    variant: ModelLike,
    calibration: object = None,
    *,
    limit: int = 8,
    feeds: FeedsLike | None = None,
    dims: Mapping[str, int] | None = None,
    timeout: float | None = None,
) -> ErrorResult:
    """SQNR of every float tensor the variant still computes under the same name.

    Without ``calibration`` data the samples are synthesized at the shapes of ``feeds`` (or
    ``dims``): the error is measured at the shapes the model runs at. The statistics are
    folded sample by sample in the worker, so memory does not grow with the sample count."""

    base, var = load(model), load(variant)
    like = validate_feeds(base, feeds) if feeds is not None else None
    data = calibration_data(base, calibration, limit=limit, seed=200, dims=dims, like=like)
    return _measured(base, var, data, timeout)


def quantization_error_run(
    run: Run, variant: Model, calibration: object = None, *, limit: int = 8
) -> ErrorResult:
    """:func:`quantization_error`'s body for a :class:`Run` of the model resolved already:
    samples synthesized at the shapes of its inputs (or ``calibration``), each tensor's
    error in the worker within its timeout."""
    data = calibration_data(run.model, calibration, limit=limit, seed=200, like=run.inputs)
    return _measured(run.model, variant, data, run.timeout)


def _measured(base: Model, var: Model, data: Calibration, timeout: float | None) -> ErrorResult:
    """Each float tensor the variant still computes under the same name, its error folded
    over ``data``'s samples in the worker."""
    producers = {t: n for n in graph_nodes(base.proto.graph) for t in n.outputs if t}
    where, skipped = _variant_tensors(producers, var.proto.graph)
    floats = float_types(base)  # once: ONNX shape inference of the whole model (~15 ms a
    # call on picodet, and it ran once per tensor: 6.7 s before the measuring began)
    where = {t: v for t, v in where.items() if floats.get(t, True)}
    stats = run_task(
        tasks_transform.tensor_errors,
        Via(
            desc="activations",
            context=f"of {base.name!r} vs {var.name!r}",
            progress=False,
            timeout=timeout,
        ),
        base_path=str(base.path),
        variant_path=str(var.path),
        pairs=where,
        samples=data.samples,
    )
    rows = []
    for t in where:
        m = stats.get(t)
        if m is None or m.shape_mismatch:
            skipped.append(t)
            continue
        node = producers[t]
        rows.append(TensorError(t, node.name, node.op_type, m.sqnr_db, m.cosine, m.max_abs))
    label = getattr(var.variant, "label", None) or var.name
    return ErrorResult(
        model=base.name,
        variant=label,
        tensors=rows,
        samples=data.source,
        synthetic=data.synthetic,
        skipped=skipped,
        model_path=str(base.path),
        settings=var.variant.config.settings() if var.variant is not None else {},
        calibration=dataclasses.asdict(saved)
        if var.variant is not None and (saved := SavedCalibration.of(var.variant)) is not None
        else {},
        notes=[base.random_note()] if base.random_ops else [],
    )


def float_types(model: Model) -> dict[str, bool]:
    """Tensor name -> whether ONNX shape inference types it as float (False for indices,
    shapes, masks, sequences and maps: their values are not scored; absent: unknown)."""
    import onnx

    inferred = inferred_graph(model.proto)
    floats = {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.BFLOAT16,
    }
    out = {
        vi.name: vi.type.tensor_type.elem_type in floats
        for vi in [*inferred.value_info, *inferred.output]
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type
    }
    for vi in [*inferred.value_info, *inferred.output]:  # sequences and maps (ZipMap)
        if vi.type.WhichOneof("value") in ("sequence_type", "map_type", "optional_type"):
            out[vi.name] = False
    return out


def _variant_tensors(
    producers: dict[str, OpNode], graph: onnx.GraphProto
) -> tuple[dict[str, str], list[str]]:
    """For each original tensor, the variant tensor holding the value its consumers see.

    In a QDQ model that is the DequantizeLinear output after the tensor's QuantizeLinear: the
    quantizer may fold an activation into the op before it (Conv+Relu → Conv whose output the
    Q/DQ pair clamps), so the tensor of the same name can hold the *pre*-activation value. Without
    a Q/DQ pair, the same name counts only if the same op type still produces it."""
    made_by = {t: n.op_type for n in graph.node for t in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    where, skipped = {}, []
    for t, node in producers.items():
        if t not in made_by:
            continue
        q = next((c for c in consumers.get(t, []) if c.op_type == "QuantizeLinear"), None)
        dq = q and next(
            (c for c in consumers.get(q.output[0], []) if c.op_type == "DequantizeLinear"), None
        )
        if dq is not None:
            where[t] = dq.output[0]
        elif made_by[t] == node.op_type:
            where[t] = t
        else:
            skipped.append(t)
    return where, skipped
