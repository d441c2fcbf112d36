"""The Lab's tabs, one row each: its name, the bar of controls at its top, the jobs its buttons
start (each: the button, the job, the :class:`~ortlab.views.lab.state.LabState` field its
result replaces, how the tab's status line names it) and whether only a decoder has it. The
Lab builds its tabs, wires its buttons and makes its status lines from this table alone: a
new tab is a row here, its job a function of the Lab (``tabjobs``) and its result a field of
the state."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ortlab.views.lab.host import LabHost
from ortlab.views.lab.limits import LIMITS_INTRO, LIMITS_JOBS
from ortlab.views.lab.tabjobs import (
    compare_runs,
    run_diverge,
    run_doctor,
    run_generate,
    run_limits,
    run_llm_bench,
    run_optimization,
    run_quantization,
    run_whatif,
)

__all__ = ["TABS", "Tab", "TabJob", "job_tabs", "tab_names"]


@dataclass(frozen=True)
class TabJob:
    """A button of a tab and the job it starts."""

    button: str
    """The :class:`~ortlab.views.lab.controls.TabControls` attribute of its button."""
    run: Callable[[LabHost], object]
    """The job: a function of the Lab that returns its result (None: nothing to keep)."""
    field: str
    """The LabState field its result replaces."""
    said: str
    """How the tab's status line names it ('the doctor')."""
    overview: bool = False
    """The Overview reads its result (the doctor's best, the generation leads): redrawn
    after it."""


@dataclass(frozen=True)
class Tab:
    """One tab of the Lab."""

    name: str
    bar: str = ""
    """The TabControls attribute shown at the tab's top ('' for none)."""
    jobs: tuple[TabJob, ...] = ()
    intro: str = ""
    """HTML shown under the bar (the Limits tab's words on what its jobs measure)."""
    decoder_only: bool = False
    """Only a decoder's Lab has it (the Generate tab)."""


def _limits_jobs() -> tuple[TabJob, ...]:
    return tuple(
        TabJob(f"limits_buttons.{k}", functools.partial(run_limits, what=k), k, j.status)
        for k, j in LIMITS_JOBS.items()
    )


TABS: tuple[Tab, ...] = (
    Tab("Overview"),
    Tab("Graph"),
    Tab(
        "Placement",
        "whatif_bar",
        (TabJob("whatif_button", run_whatif, "whatif", "the what-if"),),
    ),
    Tab("Profile"),
    Tab("Benchmark"),
    Tab(
        "Generate",
        "gen_bar",
        (
            TabJob("gen_button", run_generate, "generation", "the generation", overview=True),
            TabJob("bench_button", run_llm_bench, "llm_bench", "the benchmark matrix"),
        ),
        decoder_only=True,
    ),
    Tab(
        "Optimization",
        "opt_bar",
        (TabJob("opt_button", run_optimization, "optimization", "the optimization diff"),),
    ),
    Tab(
        "Quantization",
        "quant_bar",
        (
            TabJob("quant_button", run_quantization, "comparison", "the quantization comparison"),
            TabJob("diverge_button", run_diverge, "divergence", "the divergence"),
        ),
    ),
    Tab("Limits", "limits_bar", _limits_jobs(), intro=LIMITS_INTRO),
    Tab(
        "Doctor",
        "doctor_bar",
        (TabJob("doctor_button", run_doctor, "doctor", "the doctor", overview=True),),
    ),
    Tab("History", "", (TabJob("compare_button", compare_runs, "run_diff", "the comparison"),)),
)
"""Every tab, in the order the Lab shows them."""


def tab_names(decoder: bool) -> list[str]:
    """The tabs a Lab shows: a decoder's has its Generate tab."""
    return [t.name for t in TABS if decoder or not t.decoder_only]


def job_tabs() -> tuple[str, ...]:
    """The tabs whose buttons start work of their own, each with a status line."""
    return tuple(t.name for t in TABS if t.jobs)
