"""The widgets inside the Lab's tabs (:class:`TabControls`): the buttons that start each tab's
jobs with their status lines, the doctor's budget and Apply best, the Profile tab's top nodes,
the History tab's run pickers, the Placement tab's what-if target and QNN chip, the Limits
tab's boxes and the Generate tab's. Widgets shown on every refresh are made once here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from ortlab.analysis.placement.whatifresult import DEFAULT_QNN_OPTIONS, DEFAULT_TARGETS
from ortlab.analysis.versions import DEFAULT_VERSIONS
from ortlab.core.decoder import DecoderInfo
from ortlab.views.generate import generation_headline
from ortlab.views.html import esc
from ortlab.views.lab.status import TabStatus

if TYPE_CHECKING:
    from ortlab.analysis.generation.result import GenerationResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.views.lab.history import History

__all__ = ["DIVERGE_AGAINST", "ONE_RUN", "TabControls"]

ONE_RUN = (
    "One run so far: change a setting (the Lab runs again) or press Run, then Compare A and B "
    "shows what changed, per node."
)

DIVERGE_AGAINST = {
    "level disabled (this config)": "level=disabled",
    "level basic (this config)": "level=basic",
    "the fp16 variant": "fp16",
    "the static QDQ variant": "qdq",
}
"""The Quantization tab's other sides for ``ortlab.diverge``: the Lab's model and config
against a level or a variant (its label -> the choice the job reads)."""


class TabControls:
    """The widgets inside the tabs: the optimization, quantization, limits and doctor buttons (with
    the doctor's budget and Apply best), the Profile tab's top nodes, the History tab's run
    pickers, and the Placement tab's what-if target and QNN chip. Widgets shown on every
    refresh are made once here: a widget lives in the kernel until closed."""

    NAMES = (
        "opt_button",
        "quant_button",
        "diverge_against",
        "diverge_button",
        "budget",
        "doctor_button",
        "apply_button",
        "top_nodes",
        "run_a",
        "run_b",
        "compare_button",
        "run_snippet_button",
        "comparison_out",
        "target",
        "qnn_chip",
        "whatif_button",
        "limits_buttons",
        "sweep_dims",
        "versions",
        "gen_prompt",
        "gen_new",
        "gen_button",
        "gen_nodes",
        "bench_depths",
        "bench_button",
    )
    """The controls a Lab exposes as its own attributes."""

    def __init__(
        self, qnn_given: Mapping[str, Any], limits: Mapping[str, str], job_tabs: Sequence[str]
    ) -> None:
        """``limits``: each Limits job's button label by the state field its result fills;
        ``job_tabs``: the tabs whose buttons start jobs (the tab table's)."""
        self.status = {tab: TabStatus(tab) for tab in job_tabs}
        """Each job tab's status line and error box, under its buttons."""
        s = {tab: status.box for tab, status in self.status.items()}
        self.opt_button = w.Button(
            description="Run optimization diff (all levels)", layout=w.Layout(width="auto")
        )
        self.opt_bar = w.VBox([self.opt_button, s["Optimization"]])
        self.quant_button = w.Button(
            description="Compare original / fp16 / dynamic / static QDQ",
            layout=w.Layout(width="auto"),
        )
        self.diverge_against = w.Dropdown(
            options=list(DIVERGE_AGAINST.items()),
            description="against",
            layout=w.Layout(width="300px"),
        )
        self.diverge_button = w.Button(
            description="Where do the numbers change? (first divergence)",
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.quant_bar = w.VBox(
            [
                self.quant_button,
                w.HBox([self.diverge_against, self.diverge_button]),
                s["Quantization"],
            ]
        )
        self.limits_buttons = {
            what: w.Button(description=text, layout=w.Layout(width="auto", flex="0 0 auto"))
            for what, text in limits.items()
        }
        self.sweep_dims = w.Text(
            placeholder="batch=1,2,4; sequence=64,128",
            description="shapes",
            layout=w.Layout(width="340px"),
        )
        self.versions = w.Text(
            value=",".join(DEFAULT_VERSIONS), description="versions", layout=w.Layout(width="260px")
        )
        b = self.limits_buttons
        self.limits_bar = w.VBox(
            [
                w.HBox([b["roofline"], b["cost"], b["throughput"]]),
                w.HBox([self.sweep_dims, b["sweep"], b["perfetto"]]),
                w.HBox([self.versions, b["version_diff"]]),
                s["Limits"],
            ]
        )
        self.gen_prompt = w.BoundedIntText(
            128, min=1, max=1 << 20, description="prompt", layout=w.Layout(width="180px")
        )
        self.gen_new = w.BoundedIntText(
            64, min=1, max=1 << 20, description="new tokens", layout=w.Layout(width="200px")
        )
        self.gen_button = w.Button(
            description="Generate (TTFT, tokens/s, per layer)", layout=w.Layout(width="auto")
        )
        self.bench_depths = w.Text(
            value="0,256", description="depths", layout=w.Layout(width="220px")
        )
        self.bench_button = w.Button(
            description="Benchmark matrix (llama-bench: pp, tg at each depth)",
            layout=w.Layout(width="auto"),
        )
        self.gen_note = w.HTML()
        self.gen_bar = w.VBox(
            [
                w.HBox([self.gen_prompt, self.gen_new, self.gen_button]),
                w.HBox([self.bench_depths, self.bench_button]),
                self.gen_note,
                s["Generate"],
            ]
        )
        self.budget = w.IntSlider(60, min=10, max=600, step=10, description="budget s")
        self.doctor_button = w.Button(
            description="Run the doctor", button_style="info", layout=w.Layout(width="auto")
        )
        self.apply_button = w.Button(description="Apply best", disabled=True)
        self.doctor_bar = w.VBox(
            [w.HBox([self.budget, self.doctor_button, self.apply_button]), s["Doctor"]]
        )
        self.top_nodes = w.Select(
            options=[], rows=12, description="top nodes", layout=w.Layout(width="calc(100% - 4px)")
        )
        self.top_nodes.add_class("ortlab-top-nodes")
        self.gen_nodes = w.Select(
            options=[], rows=10, description="nodes", layout=w.Layout(width="calc(100% - 4px)")
        )
        self.gen_nodes.add_class("ortlab-gen-nodes")
        self.gen_label = w.HTML()
        self.top_label = w.HTML()
        self.worst_label = w.HTML("<b>Where the static QDQ error concentrates</b> (worst tensors)")
        self.run_a = w.Dropdown(options=[], description="run A")
        self.run_b = w.Dropdown(options=[], description="run B")
        # (never squeezed by the run pickers beside them)
        self.compare_button = w.Button(
            description="Compare A and B", layout=w.Layout(width="auto", flex="0 0 auto")
        )
        self.run_snippet_button = w.Button(
            description="Snippet of run A", layout=w.Layout(width="auto", flex="0 0 auto")
        )
        self.history_bar = w.VBox(
            [
                w.HBox(
                    [self.run_a, self.run_b, self.compare_button, self.run_snippet_button],
                    layout=w.Layout(flex_flow="row wrap"),
                ),
                s["History"],
            ]
        )
        self.comparison_out = w.Output()
        self.history_caption, self.history_warning = w.HTML(), w.HTML()
        tip = "an accelerator that is not here: its predicted partition and why nodes fall back"
        self.target = w.Dropdown(
            options=list(DEFAULT_TARGETS),
            value=DEFAULT_TARGETS[0],
            description="what if",
            tooltip=tip,
        )
        chip = {**DEFAULT_QNN_OPTIONS, **{str(k): str(v) for k, v in qnn_given.items()}}
        self.qnn_chip = w.Text(
            value=", ".join(f"{k}={v}" for k, v in chip.items()),
            description="QNN chip",
            tooltip="QNN provider options for the qnn prediction (htp_arch=73, soc_model=60 "
            "is a Snapdragon 8 Gen 2)",
            layout=w.Layout(width="270px"),
        )
        self.whatif_button = w.Button(
            description="Predict its placement", layout=w.Layout(width="auto")
        )
        self.whatif_bar = w.VBox(
            [w.HBox([self.target, self.qnn_chip, self.whatif_button]), s["Placement"]]
        )

    def profile_items(self, prof: ProfileResult) -> list[object]:
        """What the Profile tab shows: the list of the top nodes first (what is slow, to pick
        in the graph), then the profile's charts."""
        self.top_label.value = (
            f"<b>Top nodes</b>: median µs per run over {prof.runs} profiled runs, and that "
            "median's share of the median run's node time (medians throughout: one stalled "
            "call does not move them). Pick one to select, in the Graph tab, the node that "
            "carries its time."
        )
        return [
            self.top_label,
            self.top_nodes,
            prof.plot("op_type"),
            prof.plot("provider"),
            prof.plot("timeline"),
            prof.plot("memory"),
        ]

    def for_encoder_decoder(self, info: DecoderInfo | None) -> None:
        """An encoder-decoder's Generate bar: no prompt box (the encoder's inputs are made for
        it, the decoder starts from the folder's start ids) and no matrix (llama-bench's tests
        are a decoder's alone), each said in a line under the buttons."""
        if info is None or not info.seq2seq:
            return
        self.gen_prompt.disabled = self.bench_button.disabled = True
        self.bench_depths.disabled = True
        self.gen_note.value = (
            "<i>An encoder-decoder: each generation runs "
            f"{esc(info.encoder or 'its encoder', 100)} once on synthetic inputs (call "
            "ortlab.generate(model, feeds={…}) with real ones), then the decoder from the "
            f"folder's start ids {esc(str(list(info.decoder_start)), 100)}; TTFT includes the "
            "encoder. The benchmark matrix is a decoder-only model's.</i>"
        )

    def generate_items(self, g: GenerationResult) -> list[object]:
        """What the Generate tab shows: its headline (TTFT and decode tokens/s with their
        intervals), the time per token, the slowest nodes of each phase (to pick in the
        graph), then the result."""
        self.gen_label.value = (
            "<b>Slowest nodes per step</b> of each phase (the profiled generation: "
            "GenerationResult.by_phase, profiling on). Pick one to select it in the Graph tab."
        )
        head = w.HTML(
            f"<div style='font-size:1.1em;margin:2px 0 4px'><b>{esc(g.model)}</b>: "
            f"{esc(generation_headline(g), 600)}</div>"
        )
        items: list[Any] = [head, g.plot()]
        if g.profile is not None:
            items += [self.gen_label, self.gen_nodes]
        return [*items, g]

    def offer_runs(self, history: History) -> None:
        """The History tab's run pickers (kept current on every run), the last two picked; with
        one run, it in both and the comparison off until a second run (said)."""
        runs = [(f"run {r.run}: {r.label}", r.run) for r in history.records]
        self.run_a.options, self.run_b.options = runs, runs
        if len(runs) >= 2:
            self.run_a.value, self.run_b.value = runs[-2][1], runs[-1][1]
        elif runs:
            self.run_a.value = self.run_b.value = runs[0][1]
        self.compare_button.disabled = len(runs) < 2
        self.compare_button.tooltip = "" if len(runs) >= 2 else ONE_RUN

    def history_items(self, history: History) -> list[object]:
        """What the History tab shows: the run pickers, the A/B comparison, a warning where
        the same settings swung between runs, the p50 figure and the last 30 runs."""
        from ortlab.views.lab.history import history_figure

        t = history.to_pandas()
        self.history_warning.value = "".join(
            f"<div class='ortlab-warn' style='color:#a40'>⚠ {esc(s, 600)}</div>"
            for s in history.swings()
        )
        shown = history.screen_table(30)  # lab.history.to_pandas() has every run and column
        self.history_caption.value = (
            f"<i>last {len(shown)} of {len(t)} runs (lab.history.to_pandas() has all)</i>"
            if len(t) > len(shown)
            else f"<i>{esc(ONE_RUN)}</i>"
            if len(t) == 1
            else ""
        )
        return [
            self.history_bar,
            self.comparison_out,
            self.history_warning,
            self.history_caption,
            history_figure(t),
            shown,
        ]

    def button(self, name: str) -> w.Button:
        """A tab's button by its name in the tab table: an attribute (``doctor_button``), or
        a Limits job's (``limits_buttons.cost``)."""
        attr, _, key = name.partition(".")
        found = getattr(self, attr)
        return found[key] if key else found

    def qnn_options(self) -> dict[str, str]:
        """The QNN chip box as provider options ("htp_arch=73, soc_model=60")."""
        out = {}
        for part in self.qnn_chip.value.replace(";", ",").split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip() or not value.strip():
                if part.strip():
                    raise ValueError(
                        f"QNN chip: expected key=value pairs such as htp_arch=73, "
                        f"soc_model=60, got {part.strip()!r}"
                    )
                continue
            out[key.strip()] = value.strip()
        return out
