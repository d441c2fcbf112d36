"""What a tab's job may read and do of the Lab (:class:`LabHost`): the model, its config and
inputs, its progress and tabs, its state. The jobs (:mod:`tabjobs`, :mod:`limits`) are written
against this, not the Lab class, so the Lab imports them and they never import it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ortlab.analysis.labrun import Shapes
from ortlab.core.config import SessionConfig
from ortlab.core.model import Model
from ortlab.views.lab.history import History
from ortlab.views.lab.outputs import Shown
from ortlab.views.lab.state import LabState
from ortlab.views.lab.tabcontrols import TabControls

__all__ = ["LabHost"]


class LabHost(Protocol):
    """The Lab as its tab jobs see it."""

    model: Model
    current_model: Model
    """The Model the current run uses (a variant's when one is selected)."""
    history: History
    tab_controls: TabControls
    notice: Any
    """The Lab's notice line (an ipywidgets HTML)."""
    whatif_shown: list[object]
    """What the Placement tab shows of the last what-if, under the measured placement."""
    shown: Shown
    """What each tab shows now."""

    @property
    def state(self) -> LabState: ...

    @property
    def config(self) -> SessionConfig: ...

    def inputs(self) -> Shapes: ...

    def announce(self, what: str) -> None: ...

    def progress_for(self, label: str) -> Callable[[int, int], None]: ...

    def show(self, pane: str, *items: object) -> None: ...

    def show_when_seen(self, pane: str, make: Callable[[], list[object]]) -> None: ...

    def held(self) -> AbstractContextManager[None]: ...

    def wait(self, timeout: float | None = None) -> bool: ...
