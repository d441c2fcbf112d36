"""The Lab's settings as widgets: the execution providers (those that cannot load here
disabled, with the reason), level, threads, mode, spinning, IO binding, model variant,
optimizers to switch off, dims, runs, and the buttons; their layout in three columns above the
tabs; and what they say, as a SessionConfig and dims. The Lab wires them to its runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import ipywidgets as w

from ortlab.analysis.labrun import BEST, VARIANTS
from ortlab.core.config import LEVELS, SessionConfig
from ortlab.core.eps import alias as _short
from ortlab.core.grammar import parse_dims
from ortlab.core.inputs import Feeds
from ortlab.core.model import Model
from ortlab.core.runtime import TIMED_SPIN_US, Providers, has_timed_spin

if TYPE_CHECKING:
    pass

__all__ = ["LabControls"]


BOUNDED_SPIN = f"≤{TIMED_SPIN_US} µs"
"""The spinning choice bounded in time (onnxruntime 1.31.1+)."""


def spin_choices() -> list[str]:
    """The spinning dropdown's choices: the runtime's default, on, off, and spinning bounded
    in time where the runtime has it."""
    return ["ORT default", "on", "off", *([BOUNDED_SPIN] if has_timed_spin() else [])]


class LabControls:
    """The widgets of the Lab's settings (``lab.level`` is ``lab.controls.level``)."""

    NAMES = (
        "provider_boxes",
        "level",
        "intra",
        "inter",
        "mode",
        "spinning",
        "io_binding",
        "variant",
        "per_channel",
        "transformers",
        "optimizers",
        "dims",
        "runs",
        "run_button",
        "cancel_button",
        "progress",
        "snippet_button",
        "report_button",
        "error",
        "notice",
    )
    """The controls a Lab exposes as its own attributes."""

    def __init__(
        self,
        model: Model,
        feeds: Feeds | None,
        dims_given: Mapping[str, int],
        runs: int,
        eps: Providers,
    ) -> None:
        self.model, self.feeds = model, feeds
        self.provider_boxes: dict[str, w.Checkbox] = {}
        for ep in dict.fromkeys([*eps.in_build, "CPUExecutionProvider"]):
            why = next((r for r in eps.reasons if r.startswith(_short(ep) + ":")), "")
            self.provider_boxes[ep] = w.Checkbox(
                value=ep == "CPUExecutionProvider",
                description=_short(ep),
                disabled=ep not in eps.loadable or ep == "CPUExecutionProvider",
                tooltip=why or ep,
                indent=False,
            )
        self.level = w.Dropdown(options=list(LEVELS), value="all", description="level")
        self.intra = w.BoundedIntText(0, min=0, max=256, description="intra-op")
        self.inter = w.BoundedIntText(0, min=0, max=256, description="inter-op")
        self.mode = w.Dropdown(options=["sequential", "parallel"], description="mode")
        self.spinning = w.Dropdown(options=spin_choices(), description="spinning")
        self.io_binding = w.Checkbox(False, description="IO binding", indent=False)
        self.variant = w.Dropdown(options=list(VARIANTS), description="variant")
        self.per_channel = w.Checkbox(
            False, description="per-channel", indent=False, tooltip="int8 variants only"
        )
        self.transformers = w.Checkbox(False, description="transformers optimizer", indent=False)
        self.optimizers = w.SelectMultiple(
            options=[],
            rows=4,
            tooltip="ORT's graph transformers, those that changed this graph first; the selected "
            "ones are switched off (ctrl/shift-click for several)",
            layout=w.Layout(width="calc(100% - 4px)"),  # its 2 px margins inside the column
        )
        self.optimizers.add_class("ortlab-optimizers")
        self.dims = self._dims_box(dims_given)
        self.runs = w.IntSlider(runs, min=5, max=500, step=5, description="runs")
        self.run_button = w.Button(description="Run", button_style="primary")
        self.cancel_button = w.Button(description="Cancel", disabled=True)
        self.progress = w.IntProgress(0, min=0, max=1, description="idle")
        self.snippet_button = w.Button(description="Python snippet")
        self.report_button = w.Button(description="HTML report")
        self.error = w.HTML()
        self.error.add_class("ortlab-error")
        self.notice = w.HTML()
        self.notice.add_class("ortlab-notice")
        self.level.add_class("ortlab-level")
        self.run_button.add_class("ortlab-run")
        self.box = self._layout()
        """The controls laid out (the Lab shows it above its tabs)."""

    @property
    def settings(self) -> list[w.ValueWidget]:
        """The controls whose change re-runs (the dims box: on Enter, or leaving it)."""
        return [
            self.level,
            self.intra,
            self.inter,
            self.mode,
            self.spinning,
            self.io_binding,
            self.variant,
            self.per_channel,
            self.transformers,
            self.optimizers,
            self.dims,
            self.runs,
            *self.provider_boxes.values(),
        ]

    def _layout(self) -> w.VBox:
        """Three columns above full-width tabs: the graph and charts get the width. Each control
        fills its column (ipywidgets' fixed 300 px overflowed a column at 1280x800 and cut the
        boxes); the dims, whose names can be long, get a row of their own."""
        for control in (
            self.level,
            self.mode,
            self.intra,
            self.inter,
            self.spinning,
            self.variant,
            self.runs,
            self.progress,
        ):
            control.layout.width = "98%"
            control.style.description_width = "70px"
        boxes = [
            self.per_channel,
            self.io_binding,
            self.transformers,
            *self.provider_boxes.values(),
        ]
        for box in boxes:  # checkboxes are 300 px wide by default: wider than a column
            box.layout.width = "98%"
        self.dims.layout.width = "calc(100% - 6px)"  # its 2 px margins stay inside the Lab
        self.dims.style.description_width = "70px"
        for button in (
            self.run_button,
            self.cancel_button,
            self.snippet_button,
            self.report_button,
        ):
            button.layout.width = "auto"
        column = w.Layout(width="33%", min_width="240px")
        return w.VBox(
            [
                w.HBox(
                    [
                        w.VBox(
                            [
                                w.HTML("<b>execution providers</b>"),
                                w.VBox(list(self.provider_boxes.values())),
                                self.level,
                                self.mode,
                            ],
                            layout=column,
                        ),
                        w.VBox(
                            [
                                self.intra,
                                self.inter,
                                self.spinning,
                                self.variant,
                                self.per_channel,
                                self.io_binding,
                                self.transformers,
                            ],
                            layout=column,
                        ),
                        w.VBox(
                            [
                                w.HTML("ORT optimizers to switch off"),
                                self.optimizers,
                                self.runs,
                                w.HBox([self.run_button, self.cancel_button]),
                                self.progress,
                                w.HBox([self.snippet_button, self.report_button]),
                            ],
                            layout=column,
                        ),
                    ],
                    layout=w.Layout(flex_flow="row wrap"),
                ),
                self.dims,
            ]
        )

    def _dims_box(self, given: Mapping[str, int]) -> w.Text:
        """The dims box: editable symbolic dims (Enter re-runs), or the feeds' shapes, read-only."""
        if self.feeds is not None:
            return w.Text(
                self.feeds.shapes_text(),
                description="shapes",
                disabled=True,
                tooltip="The feeds given to Lab(model, feeds=…) fix every shape; make a new "
                "Lab with other feeds to change them.",
                layout=w.Layout(width="100%"),
            )
        symbolic = sorted(
            {d for t in self.model.inputs if t.shape for d in t.shape if isinstance(d, str)}
        )
        unnamed = [t.name for t in self.model.inputs if t.shape and None in t.shape]
        tip = "symbolic dims, name=int; Enter re-runs"
        if unnamed:
            tip = (
                f"{', '.join(unnamed)} {'has' if len(unnamed) == 1 else 'have'} unnamed dims, "
                "guessed from their place (see the run's notes): pass Lab(model, feeds=…) to "
                "run other shapes"
            )
        return w.Text(
            ",".join(f"{d}={given.get(d, '')}" for d in symbolic),
            description="dims",
            disabled=not symbolic,
            placeholder="batch=1,sequence=128",
            continuous_update=False,
            tooltip=tip if symbolic or unnamed else "every dim is fixed in the model",
        )

    def config(self, base: SessionConfig) -> SessionConfig:
        """The SessionConfig the controls describe: ``base`` (settings no control shows)
        with the controls' values over it."""
        providers = [ep for ep, box in self.provider_boxes.items() if box.value] or [
            "CPUExecutionProvider"
        ]
        options = {p: dict(o) for p, o in base.provider_options if p in providers}
        return base.with_(
            providers=providers,
            provider_options=options,
            level=self.level.value,
            intra_op_threads=self.intra.value,
            inter_op_threads=self.inter.value,
            execution_mode=self.mode.value,
            allow_spinning={"on": True, "off": False}.get(self.spinning.value),
            spin_duration_us=TIMED_SPIN_US if self.spinning.value == BOUNDED_SPIN else None,
            io_binding=self.io_binding.value,
            disabled_optimizers=tuple(self.optimizers.value),
            fallback="allow",
        )

    def set_to(self, c: SessionConfig, variant: str) -> None:
        """Show ``c`` and ``variant`` (Apply best: the doctor's file, used as it is, is the
        one variant offered beside the built ones)."""
        for ep, box in self.provider_boxes.items():
            box.value = ep in c.providers
        self.level.value = c.level
        self.intra.value = c.intra_op_threads
        self.inter.value = c.inter_op_threads
        self.mode.value = c.execution_mode
        self.io_binding.value = c.io_binding
        spin = c.allow_spinning
        self.spinning.value = (
            BOUNDED_SPIN
            if c.spin_duration_us == TIMED_SPIN_US and spin is not False
            else "ORT default"
            if spin is None
            else ("on" if spin else "off")
        )
        options = [o for o in self.variant.options if not o.startswith(BEST)]
        self.variant.options = options + ([variant] if variant != "none" else [])
        self.variant.value = variant
        self.per_channel.value = False
        self.transformers.value = False

    def dims_values(self, chosen: Mapping[str, int] | None = None) -> dict[str, int] | None:
        """The dims box as {name: int} (None with feeds, or when it is empty), less the values
        ortlab ``chosen`` that the box still shows: passed on, they would read "(given)"."""
        if self.feeds is not None:
            return None
        typed = parse_dims(self.dims.value)  # the one grammar of dims
        out = {n: v for n, v in typed.items() if (chosen or {}).get(n) != v}
        return out or None
