"""One measurement's inputs, resolved once at the public edge.

A verb (``ortlab.benchmark``, ``profile``, ``placement`` …) is a thin wrapper: it builds a
:class:`Run` from what the user passed (a model or a path, a config or a dict, feeds or dims)
exactly once, and everything after — the verb's body, the worker task, the result — reads that
one value. The model task in the worker gets the picklable part, a :class:`ModelJob`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from ortlab.core.config import SessionConfig
from ortlab.core.inputs import Feeds
from ortlab.core.model import Model

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11: annotations only, never imported at run time

__all__ = ["InputMaker", "ModelJob", "Progress", "Run"]

Progress = Callable[[int, int], None]
"""A progress callback: ``(done, total)``."""
InputMaker = Callable[[Mapping[str, int] | None], Feeds]
"""How the edge makes a model's inputs at dims (the model loaded and checked once)."""


@dataclass(frozen=True)
class ModelJob:
    """What a model task in the worker is given: the model's file and name, the session
    config and the feeds (arrays; ``Feeds`` keeps how its dims were chosen across pickling)."""

    model_path: str
    model_name: str
    config: SessionConfig
    feeds: Mapping[str, Any]


class Measuring(TypedDict, total=False):
    """How a :class:`Run` measures and shows itself: the fields :meth:`Run.derive` changes
    besides its model, config and inputs."""

    runs: int
    warmup: int
    progress: bool | Progress
    timeout: float | None


class RunChanges(Measuring, total=False):
    """Any field of a :class:`Run`, for :meth:`Run.with_`."""

    model: Model
    config: SessionConfig
    inputs: Feeds
    make_inputs: InputMaker | None
    unit: str


@dataclass(frozen=True)
class Run:
    """One verb call's resolved inputs: the loaded model, its :class:`SessionConfig`, the inputs
    (the caller's feeds, or feeds made at dims resolved once, each dim with its reason in
    ``inputs.dims``), how many timed runs after how many warm-up runs, and how the call shows
    and bounds itself (progress, timeout)."""

    model: Model
    config: SessionConfig
    inputs: Feeds
    runs: int = 1
    warmup: int = 0
    progress: bool | Progress = True
    timeout: float | None = None
    unit: str = "run"
    """What its progress bar counts: runs, or (a generation's verb says so) tokens."""
    make_inputs: InputMaker | None = field(default=None, compare=False, repr=False)
    """How the edge made :attr:`inputs`, for :meth:`derive` at other dims (None: a Run made
    by hand, which derives at its own inputs only)."""

    def __post_init__(self) -> None:
        if self.runs < 1 or self.warmup < 0:
            raise ValueError(
                f"runs must be >= 1 and warmup >= 0 (got runs={self.runs}, warmup={self.warmup})"
            )

    @property
    def job(self) -> ModelJob:
        """The worker's part of this run."""
        return ModelJob(str(self.model.path), self.model.name, self.config, self.inputs)

    @property
    def synthetic(self) -> bool:
        """Whether ortlab made the inputs (seeded random arrays) rather than the caller."""
        return self.inputs.synthetic

    @property
    def context(self) -> str:
        """How an error names this run: ``of 'resnet50' with CPU, level all``."""
        return f"of {self.model.name!r} with {self.config.label()}"

    def with_(self, **changes: Unpack[RunChanges]) -> Run:
        """This run with some fields changed (a config, a quiet progress)."""
        return dataclasses.replace(self, **changes)

    def derive(
        self,
        *,
        dims: Mapping[str, int] | None = None,
        config: SessionConfig | None = None,
        inputs: Feeds | None = None,
        **changes: Unpack[Measuring],
    ) -> Run:
        """A new Run of the same model, the way a stage gets one: its inputs made at ``dims``
        as the edge made these (no second load, check or resolution of what is already
        resolved), under ``config``, or with ``inputs`` given; ``changes`` as :meth:`with_`
        (runs, progress, timeout)."""
        if dims is not None and inputs is not None:
            raise ValueError("derive: give dims or inputs, not both")
        if dims is not None:
            if self.make_inputs is None:
                raise ValueError(
                    "derive(dims=…): this Run was not made by ortlab's edge, so it cannot make "
                    "inputs at other dims; pass inputs=."
                )
            inputs = self.make_inputs(dims)
        new: dict[str, Any] = dict(changes)
        if inputs is not None:
            new["inputs"] = inputs
        if config is not None:
            new["config"] = config
        return dataclasses.replace(self, **new)
