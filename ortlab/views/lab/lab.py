"""The Lab: one widget to explore a model live — settings on the left, results in tabs.

Every change re-runs in the worker (placement with profiling, then a benchmark with profiling
off) on a background thread, so the notebook never freezes (:mod:`jobs`); a progress bar and
a Cancel button show while it runs (Cancel stops the refresh at whatever step it is in); a tab's
own job (:mod:`tabjobs`: the doctor, a Limits job…) says so on that tab's status line and
returns its result, which the Lab keeps in its one typed state (:mod:`state`); a
failed job shows its error inside the Lab and keeps the previous results, if any. Each run
becomes a row of ``lab.history``; the Overview leads with its answer to what is slow
(:mod:`overview`). ``Lab(model, feeds=…)`` runs every tab with those arrays (state inputs,
unnamed dims); otherwise the dims box sets the symbolic dims and shows the ones used. Charts
are the plot layer's plotly figures, tables the results' own DataFrames/HTML: the Lab only
wires them together.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

import ortlab
from ortlab.analysis.labrun import BEST, Choice, LabRunner, Shapes, cancel_on, start_worker
from ortlab.analysis.placement.whatifresult import WhatIfResult
from ortlab.core import gcpause
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.feedcheck import validate_feeds
from ortlab.core.inputs import resolve_dims
from ortlab.views.html import esc
from ortlab.views.lab.controls import LabControls
from ortlab.views.lab.history import History, RunRecord
from ortlab.views.lab.jobs import Jobs, choose_sync
from ortlab.views.lab.kernelnodes import carriers_first, pick_in
from ortlab.views.lab.limits import LIMITS_JOBS, sweep_example
from ortlab.views.lab.outputs import TAB_STYLE, WAITING, Shown, set_outputs
from ortlab.views.lab.overview import Headline
from ortlab.views.lab.pickers import optimizer_options, top_node_options
from ortlab.views.lab.snapshot import snapshot_html
from ortlab.views.lab.state import PUBLIC_NAMES, LabState
from ortlab.views.lab.status import guess_hint
from ortlab.views.lab.tabcontrols import TabControls
from ortlab.views.lab.tabjobs import (
    opening_generation,
    show_snippet,
    whatif_items,
    write_report,
)
from ortlab.views.lab.tabs import TABS, TabJob, job_tabs, tab_names
from ortlab.views.lab.warmup import warm_up

if TYPE_CHECKING:
    from ortlab.analysis.generation.result import GenerationResult
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.core.inputs import FeedsLike
    from ortlab.core.model import Model, ModelLike
    from ortlab.views.graph.widget import GraphView

__all__ = ["Lab"]


class Lab(w.VBox):  # type: ignore[misc,unused-ignore]  # untyped base
    """``ortlab.Lab(model, feeds=None)``: controls, tabs, history. ``lab.config`` is what the
    controls say; ``lab.model_path`` the model file the current run uses. ``tab`` is the tab
    shown first ("Overview", "Graph", "Placement", "Profile", …). ``dims`` sets symbolic dims
    (the dims box starts with them; the others are guessed and shown); ``qnn_options`` fill the
    Placement tab's "QNN chip" box, the chip its QNN what-if compiles for (default
    htp_arch=73, soc_model=60: a Snapdragon 8 Gen 2).

    A run refreshes the tab on screen; the others are drawn when opened (a tab nobody looks
    at costs nothing). ``lab.shown[tab]`` draws a tab that is waiting, then returns what it
    shows.

    ``sync=True`` runs every job in the caller's thread: ``Lab(…)`` returns after its first
    run (scripts, tests). By default a live notebook runs jobs on a background thread and a
    script (no Jupyter kernel) synchronously; ``ORTLAB_LAB_SYNC=1`` or ``0`` forces either
    (``synchronous=`` is the former name of ``sync``). ``lab.wait(timeout=None)`` blocks until
    no job is in flight, then ``lab.history`` has its run; a failed job raises nothing: its
    error is shown in the Lab (in its tab for a tab's job) and kept in ``lab.last_error``."""

    def __init__(
        self,
        model: ModelLike,
        *,
        feeds: FeedsLike | None = None,
        dims: Mapping[str, int] | None = None,
        runs: int = 30,
        sync: bool | None = None,
        synchronous: bool | None = None,
        run_on_start: bool = True,
        tab: str = "Overview",
        qnn_options: Mapping[str, Any] | None = None,
    ) -> None:
        # the worker's start-up (onnxruntime's import) overlaps the Lab's own (widgets, the
        # warm-up), so the first run finds it ready
        start_worker()
        self.model = ortlab.load(model)
        self._qnn_given = dict(qnn_options or {})
        if feeds is not None and dims:
            raise OrtlabError(
                "Lab(model, feeds=…, dims=…): the feeds fix every shape already; pass one of them."
            )
        self._dims_given = {
            d.name: d.value
            for d in resolve_dims(self.model.signature, dims).values()
            if d.why == "given"
        }  # an unknown name is warned about, not kept
        self.feeds = None if feeds is None else validate_feeds(self.model, feeds)
        """The arrays every run uses (``Lab(model, feeds=…)``), or None: synthesized at dims."""
        self._auto_dims: dict[str, int] = {}
        """Dims the box shows that ortlab chose (guessed or defaults), not the user."""
        self.history = History()
        self._sync = choose_sync(sync, synchronous)
        self.runner = LabRunner(self.model, self.feeds)
        """The runs, without widgets: variants built once, inputs synthesized once per dims."""
        self.current_model: Any = self.model
        """The Model the current run uses: a variant's when one is selected (the tab jobs'
        model)."""
        # Settings no control shows (provider options, memory flags, config entries…): Apply
        # best sets them from the doctor's config; the controls override the rest.
        self._base = SessionConfig(fallback="allow")
        self._graph: GraphView | None = None
        self.state = LabState()
        """Every result the Lab's run and tab jobs produced (``lab.placement``… read it)."""
        self._build_controls(runs)
        self._build_tabs(tab)
        self.jobs = Jobs(
            self._sync,
            self.controls,
            self.tab_controls.status,
            self._guess_hint,
            cancel_on,
        )
        """The job in flight, its cancel flag and the last job's error."""
        super().__init__([w.HTML(TAB_STYLE), self.controls.box, self.error, self.tabs, self.notice])
        self.add_class("ortlab-lab")
        self.show("Overview", *self.overview())
        warm_up(self.model)
        if run_on_start:
            self.run()

    # ------------------------------------------------------------------ controls

    def _build_controls(self, runs: int) -> None:
        # the EPs measured in the worker: the Lab's kernel runs no ORT session
        self.controls = c = LabControls(
            self.model, self.feeds, self._dims_given, runs, ortlab.providers()
        )
        self.hold_runs = False
        """While True, a control's change is not a request to re-run (the Lab or a tab job
        setting a control's value or options)."""
        self._offer_optimizers(tuple(self._base.disabled_optimizers))
        for control in c.settings:
            control.observe(lambda _: None if self.hold_runs else self.run(), names="value")
        c.run_button.on_click(lambda _: self.run())
        c.cancel_button.on_click(lambda _: self.cancel())
        c.snippet_button.on_click(lambda _: show_snippet(self))
        c.report_button.on_click(lambda _: self._background(self.export_report))

    def __getattr__(self, name: str) -> Any:
        """The controls are the Lab's own: ``lab.level`` is ``lab.controls.level``,
        ``lab.budget`` is ``lab.tab_controls.budget``; so are the state's results, by their
        public names (``lab.placement``, ``lab.profile_result``: :data:`PUBLIC_NAMES`)."""
        controls = self.__dict__.get("controls")
        if controls is not None and name in LabControls.NAMES:
            return getattr(controls, name)
        tabs = self.__dict__.get("tab_controls")
        if tabs is not None and name in TabControls.NAMES:
            return getattr(tabs, name)
        state = self.__dict__.get("state")
        if state is not None and name in PUBLIC_NAMES:  # lab.placement: the state's result
            return getattr(state, PUBLIC_NAMES[name])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        """The state's results are read-only by their public names: the state is the one
        place a result is written (a job returns it; the Lab keeps it)."""
        if name in PUBLIC_NAMES:
            raise AttributeError(f"lab.{name} is read-only: the Lab keeps it in lab.state")
        super().__setattr__(name, value)

    @property
    def config(self) -> SessionConfig:
        """The SessionConfig the controls currently describe."""
        return self.controls.config(self._base)

    @property
    def model_path(self) -> Path:
        """The model file the current run uses (a variant's file when one is selected)."""
        return Path(self.current_model.path)

    def _dims(self) -> dict[str, int] | None:
        return self.controls.dims_values(self._auto_dims)  # the user's: ortlab's are guessed

    def inputs(self) -> Shapes:
        """``feeds=`` or ``dims=`` for the library calls: every tab runs at the same shapes."""
        return self.runner.inputs(None if self.feeds is not None else self._dims())

    def _shapes(self) -> str:
        """The shapes a run uses, for the History label; shows the dims used in the dims box."""
        if self.feeds is not None:
            return "feeds " + self.feeds.shapes_text()
        box = self._dims() or {}
        used = self.runner.fitted_dims(box)  # a guessed image size the model refuses: refitted
        # dims ortlab chose (guessed or defaults) stay chosen while the box shows its value
        self._auto_dims = {
            **{n: v for n, v in self._auto_dims.items() if box.get(n) == v},
            **{c.name: c.value for c in used.values() if c.why != "given"},
        }
        text = ",".join(f"{c.name}={c.value}" for c in used.values())
        if text != self.dims.value:
            with self.held():  # showing the values used is not a request to re-run
                self.dims.value = text
        return f"dims {text}" if text else ""

    # ------------------------------------------------------------------ tabs

    def _build_tabs(self, first: str) -> None:
        names = tab_names(self.model.decoder is not None)
        if first not in names:
            raise ValueError(f"tab={first!r}: choose one of {', '.join(names)}.")
        self.panes = {n: w.Output() for n in names}
        self._waiting: dict[str, Callable[[], list[Any]]] = {}
        self._waiting_lock = threading.Lock()
        self.shown = Shown(self._draw_waiting)
        """What each tab shows now (the objects, for scripts and tests)."""
        self.tabs = w.Tab(children=list(self.panes.values()), layout=w.Layout(width="100%"))
        for i, n in enumerate(names):
            self.tabs.set_title(i, n)
        self.tabs.selected_index = names.index(first)
        self.tabs.observe(
            lambda _: self._draw_waiting(self._tab_on_screen()), names="selected_index"
        )
        limits = {k: j.label for k, j in LIMITS_JOBS.items()}
        self.tab_controls = t = TabControls(self._qnn_given, limits, job_tabs())
        at = resolve_dims(self.model.signature, self._dims_given or None)  # the first run's dims
        t.sweep_dims.placeholder = sweep_example(self.model, {d.name: d.value for d in at.values()})
        if "Generate" in self.panes:  # a decoder: prefill and decode, token by token
            t.for_encoder_decoder(self.model.decoder)
        for tab in (tab for tab in TABS if tab.name in self.panes):
            for job in tab.jobs:  # each button starts its job; its result replaces a field
                start = functools.partial(
                    self._background,
                    self._keeping(job),
                    job.field,
                    tab.name,
                    job.said,
                )
                t.button(job.button).on_click(lambda _, start=start: start())
            if tab.bar:
                intro = [w.HTML(tab.intro)] if tab.intro else []
                self.show(tab.name, getattr(t, tab.bar), *intro)
        t.apply_button.on_click(lambda _: self.apply_best())
        t.top_nodes.observe(self._on_top_node, names="value")
        t.gen_nodes.observe(self._on_generation_node, names="value")
        t.run_snippet_button.on_click(lambda _: show_snippet(self, t.run_a.value))
        self._opening: GenerationResult | None = None
        """The short generation a decoder's first run ended with (:func:`opening_generation`)."""
        self.whatif_shown: list[Any] = []
        """What the Placement tab shows of the last what-if, under the measured placement."""

    def overview(self) -> list[object]:
        """The Overview: the last run's headline (what is slow, what to try), then the model."""
        if getattr(self, "_ort_info", None) is None:
            eps = ortlab.providers()
            devs = ", ".join(
                f"{d.ep_name} on {d.device_type} ({d.device_vendor})" for d in eps.devices
            )
            self._ort_info = w.HTML(f"onnxruntime {esc(eps.ort_version)} · devices: {esc(devs)}")
        last = self.history.records[-1].label if len(self.history) else ""
        head = Headline(
            self.state.benchmark,
            self.state.profile,
            self.state.placement,
            self.state.doctor,
            last,
            generation=self.state.generation,
            generation_said=(
                "a short generation run on opening, synthetic ids; the Generate tab runs the "
                "lengths in its boxes, profiled"
                if self.state.generation is not None and self.state.generation is self._opening
                else "the Generate tab's last run"
            ),
        )
        return [head, self.model.summary, self._ort_info]

    def show(self, pane: str, *items: object) -> None:
        """Replace a tab's content. Runs happen on a background thread, where ``with out:``
        capture does not work (the thread has no parent message): write the Output widget's
        outputs directly, which is thread-safe."""
        with self._waiting_lock:
            self._waiting.pop(pane, None)
        dict.__setitem__(self.shown, pane, list(items))
        set_outputs(self.panes[pane], items)

    def show_when_seen(self, pane: str, make: Callable[[], list[object]]) -> None:
        """Replace a tab's content with what ``make()`` returns: now if the tab is on screen,
        else when it is opened (until then it says so instead of showing the last run)."""
        with self._waiting_lock:
            self._waiting[pane] = make
        dict.pop(self.shown, pane, None)
        if pane == self._tab_on_screen():
            self._draw_waiting(pane)
        else:
            self.panes[pane].outputs = (WAITING,)

    def _draw_waiting(self, pane: str | None) -> bool:
        """Draw ``pane`` if a run left it waiting; False if it was not waiting."""
        with self._waiting_lock:
            make = self._waiting.pop(pane, None) if pane else None
        if make is None:
            return False
        self.show(pane, *make())  # type: ignore[arg-type]  # pane is set when make is
        return True

    def _tab_on_screen(self) -> str | None:
        i = self.tabs.selected_index
        return list(self.panes)[i] if i is not None else None

    @property
    def graph(self) -> GraphView | None:
        """The Graph tab's view of the last run (drawn now if the tab was not opened yet);
        None before the first run."""
        self._draw_waiting("Graph")
        return self._graph

    # ------------------------------------------------------------------ runs

    def run(self) -> None:
        """Re-run with the current controls (in the background unless synchronous)."""
        self._background(self._run_once, "benchmark")

    def cancel(self) -> None:
        """Stop the running job: the worker call in flight, and every step after it (the job
        runs inside ``Worker.cancel_on(flag)``; ortlab's own steps check the flag too)."""
        self.jobs.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no job is in flight (the first run of ``Lab(…)``, a tab's job); False
        if ``timeout`` seconds passed first. Raises nothing: see :attr:`last_error`."""
        return self.jobs.wait(timeout)

    @property
    def last_error(self) -> BaseException | None:
        """The last job's error (shown in the Lab too), or None when it succeeded."""
        return self.jobs.last_error

    def _background(
        self, job: Callable[[], object], field: str = "", tab: str = "", what: str = ""
    ) -> None:
        """Run ``job`` (guarded); ``field`` names the state field holding the results the job
        replaces, to say whether a failure keeps previous ones; ``tab`` the tab whose status
        line follows it, as ``what``."""
        kept = bool(field) and getattr(self.state, field) is not None
        self.jobs.start(job, kept, tab, what)

    def _keeping(self, job: TabJob) -> Callable[[], None]:
        """``job`` of this Lab, its result kept as the state's ``job.field`` (None keeps the
        old: a job that had nothing to do); the Overview redrawn after a job it reads."""

        def run() -> None:
            result = job.run(self)
            if result is not None:
                self.state = self.state.keep(**{job.field: result})
            if job.overview:
                self.show_when_seen("Overview", self.overview)
            if isinstance(result, WhatIfResult):
                self._show_whatif(result)

        return run

    def _show_whatif(self, result: WhatIfResult) -> None:
        """A what-if under the measured placement, in the Placement tab (kept for the tab's
        later redraws; the widgets of the one before closed: a widget lives until closed)."""
        for old in self.whatif_shown:
            if isinstance(old, w.DOMWidget):
                old.close()
        self.whatif_shown = whatif_items(self.model, result)
        measured = [self.state.placement] if self.state.placement is not None else []
        self.show("Placement", self.tab_controls.whatif_bar, *measured, *self.whatif_shown)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """While held, a control's change is not a request to re-run (the Lab or a tab job
        setting a control's value or options); restored on the way out, error or not."""
        was, self.hold_runs = self.hold_runs, True
        try:
            yield
        finally:
            self.hold_runs = was

    def _step(self, what: str) -> None:
        self.jobs.step(what)

    def announce(self, what: str) -> None:
        """A step of the job in flight (Cancel stops it here), said on its tab's status line
        and on the progress bar above the tabs."""
        self.jobs.announce(what)

    def progress_for(self, label: str) -> Callable[[int, int], None]:
        """A ``progress(done, total)`` callback for a library call of the job, as ``label``: the
        bar above the tabs and the job's tab."""
        return self.jobs.progress(label)

    def _guess_hint(self, err: Exception) -> str:
        return "" if self.feeds is not None else guess_hint(err, self._auto_dims)

    def choice(self) -> Choice:
        """What the controls say, for the widget-free runner (:class:`LabRunner`)."""
        return Choice(
            config=self.config,
            variant=str(self.variant.value),
            per_channel=self.per_channel.value,
            transformers=self.transformers.value,
            dims=None if self.feeds is not None else self._dims(),
            runs=self.runs.value,
        )

    def _run_once(self) -> None:
        choice, shapes = self.choice(), self._shapes()
        self.current_model = self.runner.variant_model(choice, self.announce)
        built = time.perf_counter()  # variants are built once and cached: not a toggle's cost
        with gcpause.held():  # no full collections mid-refresh (see ortlab.core.gcpause)
            self._refresh(choice, shapes, built)

    def _refresh(self, choice: Choice, shapes: str, built: float) -> None:
        done = self.runner.run(choice, step=self._step, progress=self.progress_for)
        model, pl, b = done.model, done.placement, done.benchmark
        self._step("showing the results")
        prof = pl.profile
        assert prof is not None  # placement() keeps the profile it timed the join with
        self.state = self.state.keep(placement=pl, profile=prof, benchmark=b)
        self._offer_optimizers(tuple(self.optimizers.value))
        self.show_when_seen("Graph", lambda: [self._new_graph(model, pl)])
        self.show_when_seen(
            "Placement", lambda: [self.tab_controls.whatif_bar, pl, *self.whatif_shown]
        )
        self._top_nodes_list(prof)
        self.show_when_seen("Profile", lambda: self.tab_controls.profile_items(prof))
        self.show_when_seen("Benchmark", lambda: [b, b.plot()])
        seconds = time.perf_counter() - built
        record = RunRecord.of(len(self.history) + 1, done, shapes, seconds)
        self.history.add(record)
        g = opening_generation(self)  # a decoder's first run: TTFT and tokens/s lead
        if g is not None:
            self.state = self.state.keep(generation=g)
            self._opening = g
        self.show_when_seen("Overview", self.overview)
        self.tab_controls.offer_runs(self.history)
        self.show_when_seen("History", self._history_items)

    def _new_graph(self, model: Model, pl: PlacementResult) -> GraphView:
        old, new = self._graph, ortlab.graph(model, placement=pl)
        self._graph = new
        if old is not None:  # a widget lives in the kernel until closed (~300 KB with dagre)
            old.layout.close()  # its Layout is a widget of its own
            old.close()
        return new

    def _offer_optimizers(self, chosen: tuple[str, ...]) -> None:
        """``chosen`` switched off (ORT then does not list them), then the transformers the
        last session ran, those that changed the graph first (with how often)."""
        r = self.state.placement.report if self.state.placement is not None else None
        options = optimizer_options(r, chosen)
        if options == list(self.optimizers.options) and chosen == self.optimizers.value:
            return
        with self.held():  # new options are not a request to re-run
            self.optimizers.options = options
            self.optimizers.value = chosen

    def _top_nodes_list(self, prof: ProfileResult) -> None:
        """The Profile tab's list of the slowest nodes (a control: kept current on every run,
        so a script can pick a row before the tab is opened)."""
        with self.held():
            self.top_nodes.options = top_node_options(prof, self.state.placement)
            self.top_nodes.value = None

    def _on_top_node(self, change: dict[str, Any]) -> None:
        """A top-nodes row picked: in the graph, highlight the original nodes its kernel
        computes and select the one that carries its time (the Conv of a Conv+Relu kernel, not
        the Relu fused into it), and show the Graph tab."""
        name = change["new"]
        if self.hold_runs or not name or self.state.placement is None:
            return
        self._pick_node(name)

    def _on_generation_node(self, change: dict[str, Any]) -> None:
        """A Generate-tab row picked ('phase<TAB>node'): the same node selected in the graph,
        in a merged decoder the one in the If's branch that runs in that phase."""
        if self.hold_runs or not change["new"] or self.state.placement is None:
            return
        phase, name = change["new"].split("\t", 1)
        info = self.model.decoder
        self._pick_node(name, branch=info.branch_of(phase) if info else None)

    def _pick_node(self, name: str, branch: str | None = None) -> None:
        """Select, in the Graph tab, the original node(s) kernel ``name`` computes (its time's
        carrier first; in ``branch`` of an If whose bodies repeat the names) and show the
        tab; a notice when none is in the original graph."""
        view = self.graph
        if view is None:  # no run drawn yet: nothing to pick
            return
        originals = carriers_first(self.state.placement, self.state.profile).get(name) or [name]
        if not pick_in(view, list(originals), branch):
            self.notice.value = f"<i>{esc(name)} has no node in the original graph</i>"
            return
        self.tabs.selected_index = list(self.panes).index("Graph")

    def _history_items(self) -> list[object]:
        return self.tab_controls.history_items(self.history)

    def apply_best(self) -> None:
        """Set the Lab to exactly the doctor's best verified configuration and run it: its
        model file (the variant the doctor measured, per-channel and all), providers and
        provider options, level, threads, spinning, IO binding and every other setting."""
        d = self.state.doctor
        if d is None:
            raise OrtlabError("Run the doctor first (Doctor tab): there is no best yet.")
        best = d.best
        c = best.config
        if c.providers == "auto" or not set(c.providers) <= set(self.provider_boxes):
            raise OrtlabError(
                f"The doctor's best uses providers {c.providers!r}; the Lab offers "
                f"{list(self.provider_boxes)}. Run its snippet (d.best.snippet()) instead."
            )
        variant = "none"
        if best.variant != "original" or Path(best.model_path) != Path(self.model.path):
            variant = BEST + best.variant
            self.runner.add_best(variant, ortlab.load(best.model_path, name=best.variant))
        with self.held():
            self._base = c.with_(fallback="allow")
            self.controls.set_to(c, variant)
            self._offer_optimizers(tuple(c.disabled_optimizers))
        self.run()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, object]:
        """The live widget, and beside it a static snapshot (``text/html``) that a page without
        a widget manager shows instead: ``./run --headless``'s tour, nbconvert, GitHub."""
        got = super()._repr_mimebundle_(**kwargs)
        data = dict(got[0] if isinstance(got, tuple) else got or {})
        data["text/html"] = self.snapshot_html()
        return data

    def snapshot_html(self) -> str:
        """The Lab's state as plain HTML (no script, no network): :func:`snapshot_html` of
        the last run's results."""
        failed = bool(self.error.value)
        return snapshot_html(
            self.model.name,
            self.config.label(),
            self.history,
            benchmark=self.state.benchmark,
            placement=self.state.placement,
            profile=self.state.profile,
            failed=failed,
        )

    def export_report(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the Lab's state (last run's placement, profile and benchmark; optimization
        diff, quantization comparison and doctor when run; history) as one HTML file. Default:
        ``ortlab-report-<model>.html`` in the working directory. The Limits tab's results
        (roofline, cost, throughput, sweep, versions) are sections of their own."""
        out = write_report(self, path)
        self.state = self.state.keep(report_path=out)
        return out
