"""The first-divergence tasks (run inside the worker): two sides — a (model, config) each —
run on the same feeds; every tensor both compute compared, in groups of exposed outputs so a
pass holds about :data:`~ortlab.engine.errorsums.ACTIVATIONS_BYTES` of activations;
the final outputs compared once more with nothing exposed (exposing a tensor changes what ORT
fuses); and one node of the other side run alone on the reference's inputs, which is the error
that node introduces by itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.inputs import FeedsLike
from ortlab.core.onnx_util import as_types, seed_random_ops, typed_inputs
from ortlab.core.run import Progress
from ortlab.engine.errorsums import ErrorSums, Side, fold_groups, with_outputs
from ortlab.engine.replies import AloneReply, DivergeReply, ProbeReply, TensorStats
from ortlab.engine.session import build_session
from ortlab.engine.tasks import prepare_feeds

if TYPE_CHECKING:
    import onnx
    from onnxruntime import InferenceSession


__all__ = ["alone", "diverge_errors", "probe"]


def diverge_errors(
    progress: Progress,
    *,
    reference: Side,
    other: Side,
    pairs: dict[str, str],
    finals: dict[str, str],
    feeds: FeedsLike,
    chunk: int = 64,
) -> DivergeReply:
    """Per reference tensor (``pairs``: reference tensor -> the other side's tensor), the other
    side's error against it; the final outputs (``finals``, paired likewise) compared with no
    tensor exposed; and how many session runs it took."""
    prepared = prepare_feeds(feeds)
    plain_ref = with_outputs(reference.path, list(finals), reference.what, reference.config)
    plain_other = with_outputs(other.path, list(finals.values()), other.what, other.config)
    final = _compare(plain_ref(prepared), plain_other(prepared), finals)
    del plain_ref, plain_other
    tensors, runs = fold_groups(
        progress,
        reference,
        other,
        pairs,
        [prepared],
        chunk=chunk,
        most=1024,
    )
    return DivergeReply(tensors=tensors, finals=final, session_runs=runs + 2)


def _compare(
    ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], pairs: Mapping[str, str]
) -> dict[str, TensorStats]:
    out = {}
    for t, u in pairs.items():
        x, y = ref.get(t), got.get(u)
        if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
            s = ErrorSums()
            s.add(x, y)
            out[t] = s.metrics()
    return out


def probe(
    progress: Progress,  # noqa: ARG001 - task signature
    *,
    reference: Side,
    other: Side,
    tensor: str,
    finals: dict[str, str],
    feeds: FeedsLike,
) -> ProbeReply:
    """One step of the bisection: both sides run with only ``tensor`` exposed beside the final
    outputs (so ORT fuses everywhere else as it does unexposed); that tensor's error and the
    final outputs'."""
    prepared = prepare_feeds(feeds)
    ref = with_outputs(reference.path, [tensor, *finals], reference.what, reference.config)
    mine = ref(prepared)
    del ref
    got = with_outputs(other.path, [tensor, *finals.values()], other.what, other.config)
    theirs = got(prepared)
    del got
    stats = _compare(mine, theirs, {tensor: tensor})
    return ProbeReply(stats.get(tensor), _compare(mine, theirs, finals))


def alone(
    progress: Progress,  # noqa: ARG001 - task signature
    *,
    reference: Side,
    other: Side,
    node_inputs: list[str],
    output: str,
    other_output: str,
    node: bytes,
    feeds: FeedsLike,
    reference_node: bytes | None = None,
    other_types: Mapping[str, str] | None = None,
    reference_types: Mapping[str, str] | None = None,
) -> AloneReply:
    """The error one node of the other side introduces by itself: the reference runs to give
    the node's inputs (``node_inputs``: those of its region on both sides) and its output;
    the other side's node (``node``: a model of it, with the producers of inputs the
    comparison did not see, its weights inside, serialized) runs alone under the other side's
    config on those very inputs, each cast to the float type that side's model computes it
    in (``other_types``: an fp16 side reads float16); its output against the reference's.
    The inputs come back in the reply (a repro's ``inputs.npz`` when the user asks for one;
    nothing is left on disk). Each side's region (``reference_node``: the reference's) is
    built as its session builds it: what ORT made of it (its kernels, as the optimized region
    lists them) and the EP that ran its last node."""
    import onnx

    prepared = prepare_feeds(feeds)
    ref = with_outputs(reference.path, [*node_inputs, output], reference.what, reference.config)
    values = ref(prepared)
    del ref
    proto = onnx.load_from_string(node)
    seed_random_ops(proto.graph)
    kept = {k: values[k] for k in node_inputs if k in values}  # the repro's, both sides'
    inputs = as_types(
        {i.name: kept[i.name] for i in proto.graph.input if i.name in kept}, other_types
    )
    typed_inputs(proto, inputs)
    sess, kernels, provider = _built(proto, other.config, other_output)
    got = sess.run([other_output], inputs)[0]
    ref_kernels: list[str] = []
    ref_on = ""
    if reference_node is not None:
        region = onnx.load_from_string(reference_node)
        mine = {i.name: kept[i.name] for i in region.graph.input if i.name in kept}
        typed_inputs(region, as_types(mine, reference_types))
        _, ref_kernels, ref_on = _built(region, reference.config, output)
    s = ErrorSums()
    s.add(values[output], np.asarray(got))
    stats = s.metrics()
    return AloneReply(stats, kept, ref_kernels, kernels, ref_on, provider)


def _built(
    proto: onnx.ModelProto, config: SessionConfig | None, output: str
) -> tuple[InferenceSession, list[str], str]:
    """A region's session under ``config``, what ORT made of it (its optimized nodes as
    'OpType name'; none where an EP compiled it and ORT cannot write it out) and the EP that
    ran the node computing ``output`` (ORT's verbose placement)."""
    import onnx

    cfg = config or SessionConfig()
    name = f"the region of {output!r} alone"
    with cache.temp_dir("alone-") as folder:
        path, optimized = folder / "node.onnx", folder / "optimized.onnx"
        onnx.save_model(proto, str(path))
        try:
            sess, report = build_session(
                str(path), cfg, model_name=name, log_severity=0, optimized_model_path=str(optimized)
            )
            made = onnx.load(str(optimized), load_external_data=False)
            kernels = [f"{n.op_type} {n.name}".strip() for n in made.graph.node]
        except Exception:  # noqa: BLE001 - compiled by an EP: ORT cannot write it out
            sess, report = build_session(str(path), cfg, model_name=name, log_severity=0)
            kernels = []
    producer = next((n.name for n in proto.graph.node if output in n.output), "")
    return sess, kernels, report.placements.get(producer) or report.all_on
