"""The Lab: one widget to explore a model live — settings on the left, results in tabs.

Every change re-runs in the worker (placement with profiling, then a benchmark with profiling
off) on a background thread, so the notebook never freezes; a progress bar and a Cancel
button show while it runs; a failed run shows its error inside the Lab and keeps the previous
results. Each run becomes a row of ``lab.history``. Charts are the plot layer's plotly figures,
tables the results' own DataFrames/HTML: the Lab only wires them together.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w

import ortlab
from ortlab.config import LEVELS, SessionConfig, _short
from ortlab.errors import OrtlabError

__all__ = ["Lab", "RunRecord"]

VARIANTS = ("none", "dynamic int8", "static QDQ", "static QOperator", "fp16")


@dataclass
class RunRecord:
    run: int
    config: SessionConfig
    variant: str
    p50_ms: float
    p90_ms: float
    mean_ms: float
    providers: str
    fallback: str
    seconds: float
    benchmark: Any = field(repr=False, default=None)
    placement: Any = field(repr=False, default=None)


class History:
    """Every run of a Lab, one row each."""

    def __init__(self) -> None:
        self.records: list[RunRecord] = []

    def to_pandas(self) -> Any:
        """run, label, variant, p50_ms, p90_ms, mean_ms, providers, fallback, seconds."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "run": r.run,
                    "label": r.config.label(),
                    "variant": r.variant,
                    "p50_ms": r.p50_ms,
                    "p90_ms": r.p90_ms,
                    "mean_ms": r.mean_ms,
                    "providers": r.providers,
                    "fallback": r.fallback,
                    "seconds": r.seconds,
                }
                for r in self.records
            ],
            columns=[
                "run",
                "label",
                "variant",
                "p50_ms",
                "p90_ms",
                "mean_ms",
                "providers",
                "fallback",
                "seconds",
            ],
        )

    def compare(self, a: int, b: int) -> Any:
        """Two runs side by side with deltas (not interleaved: ortlab.compare_configs gives a
        verdict with uncertainty)."""
        import pandas as pd

        ra, rb = self.records[a], self.records[b]
        rows = [
            {
                "metric": k,
                f"run {ra.run}": getattr(ra, k),
                f"run {rb.run}": getattr(rb, k),
                "delta": getattr(rb, k) - getattr(ra, k),
                "ratio": getattr(rb, k) / getattr(ra, k) if getattr(ra, k) else float("nan"),
            }
            for k in ("p50_ms", "p90_ms", "mean_ms")
        ]
        return pd.DataFrame(rows)

    def __len__(self) -> int:
        return len(self.records)


class Lab(w.VBox):  # type: ignore[misc,unused-ignore]  # untyped base
    """``ortlab.Lab(model)``: controls, tabs, history. ``lab.config`` is what the controls say."""

    def __init__(
        self,
        model: Any,
        *,
        runs: int = 30,
        synchronous: bool | None = None,
        run_on_start: bool = True,
    ) -> None:
        self.model = ortlab.load(model)
        self.history = History()
        # Synchronous runs block the cell (scripts, tests, headless execution of notebooks:
        # ORTLAB_LAB_SYNC=1); in a live notebook runs go to a background thread.
        self._sync = (
            synchronous if synchronous is not None else (os.environ.get("ORTLAB_LAB_SYNC") == "1")
        )
        self._thread: threading.Thread | None = None
        self._variants: dict[str, Any] = {}
        self._build_controls(runs)
        self._build_tabs()
        super().__init__([w.HBox([self._controls, self.tabs]), self.error, self.notice])
        self.add_class("ortlab-lab")
        self._overview()
        if run_on_start:
            self.run()

    # ------------------------------------------------------------------ controls

    def _build_controls(self, runs: int) -> None:
        from ortlab.session import auto_providers

        loadable, reasons = auto_providers()
        import onnxruntime as ort

        self.provider_boxes: dict[str, w.Checkbox] = {}
        for ep in dict.fromkeys([*ort.get_available_providers(), "CPUExecutionProvider"]):
            ok = ep in loadable
            why = next((r for r in reasons if r.startswith(_short(ep) + ":")), "")
            box = w.Checkbox(
                value=ep == "CPUExecutionProvider",
                description=_short(ep),
                disabled=not ok or ep == "CPUExecutionProvider",
                tooltip=why or ep,
                indent=False,
            )
            self.provider_boxes[ep] = box
        self.level = w.Dropdown(options=list(LEVELS), value="all", description="level")
        self.intra = w.BoundedIntText(0, min=0, max=256, description="intra-op")
        self.inter = w.BoundedIntText(0, min=0, max=256, description="inter-op")
        self.mode = w.Dropdown(options=["sequential", "parallel"], description="mode")
        self.io_binding = w.Checkbox(False, description="IO binding", indent=False)
        self.variant = w.Dropdown(options=list(VARIANTS), description="variant")
        self.transformers = w.Checkbox(False, description="transformers optimizer", indent=False)
        symbolic = sorted(
            {d for t in self.model.inputs if t.shape for d in t.shape if isinstance(d, str)}
        )
        self.dims = w.Text(
            ",".join(f"{d}=" for d in symbolic),
            description="dims",
            disabled=not symbolic,
            placeholder="batch=1,sequence=128",
        )
        self.runs = w.IntSlider(runs, min=5, max=500, step=5, description="runs")
        self.run_button = w.Button(description="Run", button_style="primary")
        self.cancel_button = w.Button(description="Cancel", disabled=True)
        self.progress = w.IntProgress(0, min=0, max=1, description="idle")
        self.snippet_button = w.Button(description="Python snippet")
        self.error = w.HTML()
        self.error.add_class("ortlab-error")
        self.notice = w.HTML()
        self.notice.add_class("ortlab-notice")
        settings = [
            self.level,
            self.intra,
            self.inter,
            self.mode,
            self.io_binding,
            self.variant,
            self.transformers,
        ]
        for control in (*settings, self.runs, *self.provider_boxes.values()):
            control.observe(lambda _: self.run(), names="value")
        self.run_button.on_click(lambda _: self.run())
        self.cancel_button.on_click(lambda _: ortlab.worker.get_worker().cancel())
        self.snippet_button.on_click(lambda _: self._show_snippet())
        self.level.add_class("ortlab-level")
        self.run_button.add_class("ortlab-run")
        self._controls = w.VBox(
            [
                w.HTML("<b>execution providers</b>"),
                w.VBox(list(self.provider_boxes.values())),
                *settings,
                self.dims,
                self.runs,
                w.HBox([self.run_button, self.cancel_button]),
                self.progress,
                self.snippet_button,
            ],
            layout=w.Layout(min_width="300px"),
        )

    @property
    def config(self) -> SessionConfig:
        """The SessionConfig the controls currently describe."""
        providers = [ep for ep, box in self.provider_boxes.items() if box.value]
        return SessionConfig(
            providers=providers or ["cpu"],
            level=self.level.value,
            intra_op_threads=self.intra.value,
            inter_op_threads=self.inter.value,
            execution_mode=self.mode.value,
            io_binding=self.io_binding.value,
            fallback="allow",
        )

    def _dims(self) -> dict[str, int] | None:
        out = {}
        for part in self.dims.value.split(","):
            name, _, value = part.partition("=")
            if name.strip() and value.strip():
                if not value.strip().isdigit():
                    raise OrtlabError(f"dims: {part!r} is not name=integer (e.g. batch=1).")
                out[name.strip()] = int(value)
        return out or None

    # ------------------------------------------------------------------ tabs

    def _build_tabs(self) -> None:
        names = [
            "Overview",
            "Graph",
            "Placement",
            "Profile",
            "Benchmark",
            "Optimization",
            "Quantization",
            "History",
        ]
        self.panes = {n: w.Output() for n in names}
        self.shown: dict[str, list[Any]] = {}
        """What each tab shows now (the objects, for scripts and tests)."""
        self.tabs = w.Tab(children=list(self.panes.values()), layout=w.Layout(width="100%"))
        for i, n in enumerate(names):
            self.tabs.set_title(i, n)
        self.opt_button = w.Button(description="Run optimization diff (all levels)")
        self.opt_button.on_click(lambda _: self._background(self._optimization))
        self.quant_button = w.Button(description="Compare fp32 / fp16 / dynamic / static QDQ")
        self.quant_button.on_click(lambda _: self._background(self._quantization))
        self._show("Optimization", self.opt_button)
        self._show("Quantization", self.quant_button)

    def _overview(self) -> None:
        import onnxruntime as ort

        from ortlab.runtime import devices

        devs = ", ".join(f"{d.ep_name} on {d.device_type} ({d.device_vendor})" for d in devices())
        info = w.HTML(f"onnxruntime {ort.__version__} · devices: {devs}")
        self._show("Overview", self.model.summary, info)

    def _show(self, pane: str, *items: Any) -> None:
        """Replace a tab's content. Runs happen on a background thread, where ``with out:``
        capture does not work (the thread has no parent message): write the Output widget's
        outputs directly, which is thread-safe."""
        self.shown[pane] = list(items)
        out = self.panes[pane]
        out.outputs = ()
        for item in items:
            out.append_display_data(item)

    # ------------------------------------------------------------------ runs

    def run(self) -> None:
        """Re-run with the current controls (in the background unless synchronous)."""
        self._background(self._run_once)

    def _background(self, job: Any) -> None:
        if self._thread is not None and self._thread.is_alive():
            ortlab.worker.get_worker().cancel()
            self._thread.join(10)
        if self._sync:
            self._guarded(job)
            return
        self._thread = threading.Thread(target=self._guarded, args=(job,), daemon=True)
        self._thread.start()

    def _guarded(self, job: Any) -> None:
        self.cancel_button.disabled = False
        self.run_button.disabled = True
        try:
            job()
            self.error.value = ""
        except ortlab.WorkerCancelledError:
            self.error.value = "<i>cancelled: previous results kept</i>"
        except Exception as err:  # noqa: BLE001 - shown in the Lab, never lost in a log
            from ortlab.render import esc

            detail = "" if isinstance(err, OrtlabError) else traceback.format_exc()
            self.error.value = (
                f'<div class="ortlab-warn" style="color:#a40"><b>{esc(type(err).__name__)}</b>: '
                f"{esc(err, 4000)}</div><pre>{esc(detail, 8000)}</pre>"
                "<div>Previous results are kept.</div>"
            )
        finally:
            self.cancel_button.disabled = True
            self.run_button.disabled = False
            self.progress.description = "idle"

    def _progress(self, label: str) -> Any:
        def update(done: int, total: int) -> None:
            self.progress.max = max(total, 1)
            self.progress.value = done
            self.progress.description = label

        return update

    def _variant_model(self) -> Any:
        name = self.variant.value
        base = self.model
        if self.transformers.value:
            base = ortlab.load(ortlab.transformer_optimize(base).path)
        key = f"{name}|{self.transformers.value}"
        if name == "none":
            return base
        if key not in self._variants:
            self.progress.description = f"building {name}"
            if name == "fp16":
                self._variants[key] = ortlab.to_fp16(base)
            elif name == "dynamic int8":
                self._variants[key] = ortlab.quantize(base, mode="dynamic")
            else:
                fmt = "qdq" if name == "static QDQ" else "qoperator"
                self._variants[key] = ortlab.quantize(
                    base, mode="static", format=fmt, calibration_size=8
                )
        return self._variants[key]

    def _run_once(self) -> None:
        start = time.perf_counter()
        cfg, dims, model = self.config, self._dims(), self._variant_model()
        pl = ortlab.placement(model, cfg, runs=5, dims=dims, progress=self._progress("placement"))
        prof = ortlab.profile(model, cfg, runs=5, dims=dims, progress=self._progress("profile"))
        b = ortlab.benchmark(
            model, cfg, runs=self.runs.value, dims=dims, progress=self._progress("benchmark")
        )
        record = RunRecord(
            run=len(self.history) + 1,
            config=cfg,
            variant=self.variant.value,
            p50_ms=b.stats.p50_ms,
            p90_ms=b.stats.p90_ms,
            mean_ms=b.stats.mean_ms,
            providers=", ".join(_short(p) for p in b.report.active),
            fallback="; ".join(_short(m.provider) for m in b.report.missing),
            seconds=time.perf_counter() - start,
            benchmark=b,
            placement=pl,
        )
        self.history.records.append(record)
        self.graph = ortlab.graph(model, placement=pl)
        self._show("Graph", self.graph)
        self._show("Placement", pl)
        self._show(
            "Profile",
            prof.plot("op_type"),
            prof.plot("provider"),
            prof.plot("timeline"),
            prof.top_nodes(15),
        )
        self._show("Benchmark", b, b.plot())
        self._history_pane()

    def _history_pane(self) -> None:
        import plotly.graph_objects as go

        t = self.history.to_pandas()
        fig = go.Figure(
            go.Scatter(
                x=t["run"],
                y=t["p50_ms"],
                mode="lines+markers",
                text=t["label"],
                hovertemplate="run %{x}: %{y:.3f} ms<br>%{text}",
            )
        )
        fig.update_layout(
            title="p50 latency across runs",
            xaxis_title="run",
            yaxis_title="ms",
            template="plotly_white",
            height=300,
        )
        self._show("History", t, fig)

    def _optimization(self) -> None:
        opt = ortlab.optimization_diff(
            self.model,
            config=self.config.with_(providers=["cpu"]),
            dims=self._dims(),
            progress=self._progress("levels"),
        )
        self.optimization = opt
        self._show("Optimization", self.opt_button, opt, opt.latency, opt.counts)

    def _quantization(self) -> None:
        m = self.model
        variants = [
            ortlab.to_fp16(m),
            ortlab.quantize(m, mode="dynamic"),
            ortlab.quantize(m, mode="static", calibration_size=8),
        ]
        cmp = ortlab.compare(m, variants, self.config, progress=self._progress("variants"))
        self.comparison = cmp
        self._show("Quantization", self.quant_button, cmp, cmp.plot())

    def _show_snippet(self) -> None:
        from ortlab.render import esc

        code = self.config.snippet(str(self.model.path))
        self.notice.value = f"<b>plain onnxruntime</b><pre>{esc(code, 20000)}</pre>"
