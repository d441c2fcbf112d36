"""The options of the Lab's pickers: the optimizers box (the transformers to switch off) and the
Profile tab's slowest nodes, from the per-node medians and shares they show."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.views.lab.kernelnodes import carriers_first

if TYPE_CHECKING:
    from ortlab.analysis.generation.result import GenerationResult
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.core.result import Table
    from ortlab.core.sessionreport import SessionReport

__all__ = ["generation_node_options", "median_shares", "optimizer_options", "top_node_options"]


def optimizer_options(
    report: SessionReport | None, chosen: tuple[str, ...]
) -> list[tuple[str, str]]:
    """The optimizers box: ``chosen`` switched off (ORT then does not list them), then the
    transformers the last session ran (``report``), those that changed the graph first (with
    how often)."""
    fired = sorted(report.fired.items(), key=lambda kv: (-kv[1], kv[0])) if report else []
    quiet = sorted(set(report.transformers) - set(report.fired) - set(chosen)) if report else []
    options = [(f"{n} (off)", n) for n in chosen]
    options += [(f"{n} (fired {k}×)", n) for n, k in fired if n not in chosen]
    return options + [(n, n) for n in quiet]


def top_node_options(
    prof: ProfileResult, placement: PlacementResult | None
) -> list[tuple[str, str]]:
    """The Profile tab's slowest nodes (25), each kernel named by the original nodes it
    computes (the one that carries its time first), with its median time and share
    (``ProfileResult.by_node``'s, as everywhere)."""
    from ortlab.views.profile import kernel_label

    fused = carriers_first(placement, prof)
    return [
        (
            f"{kernel_label(r.node, fused.get(r.node, []))} · {r.op_type} · {r.median_us:.0f} µs"
            f" · {r.share:.1%}",
            r.node,
        )
        for r in median_shares(prof).head(25).itertuples()
    ]


def median_shares(prof: ProfileResult) -> Table:
    """Per node: op_type, median_us and share as :meth:`ProfileResult.by_node` defines them
    (the node's median run, profiling on; share of the median run), slowest first."""
    t = prof.by_node()
    return t[["node", "op_type", "us_per_run", "share"]].rename(columns={"us_per_run": "median_us"})


def generation_node_options(g: GenerationResult, per_phase: int = 12) -> list[tuple[str, str]]:
    """The Generate tab's slowest nodes, ``per_phase`` of each phase, with their time per step
    and share of the phase (``GenerationResult.by_phase``'s, as the table shows them); the
    value is the node's name, the same node in either phase."""
    t = g.by_phase()
    out: list[tuple[str, str]] = []
    for phase in dict.fromkeys(t["phase"]):
        rows = t[(t["phase"] == phase) & (t["us_per_step"] > 0)].head(per_phase)
        out += [
            (
                f"{phase} · {r.node} · {r.op_type} · {r.us_per_step:.1f} µs/step · {r.share:.1%}",
                f"{phase}\t{r.node}",
            )
            for r in rows.itertuples()
        ]
    return out
