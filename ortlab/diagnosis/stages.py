"""The doctor's stages run in order (memory, generation, build, screen, CPU cost, accuracy,
quantization fix, combine, explain): each a function that returns its
:class:`~ortlab.diagnosis.outcome.Outcome`, folded into the facts so far as it ends; each named
to the progress as it starts; the budget or an ortlab error ending the plan there with what the
stages before it measured kept (the failed stage's own notes and failures too); a cancel from
the user ending the doctor."""

from __future__ import annotations

from collections.abc import Callable

from ortlab.core.errors import OrtlabError, WorkerCancelledError, WorkerTimeoutError, error_text
from ortlab.diagnosis.budget import BudgetSpentError
from ortlab.diagnosis.facts import CandidateFailure
from ortlab.diagnosis.ledger import Ledger
from ortlab.diagnosis.outcome import Got, Stage, begin

__all__ = ["run_plan", "said_stage"]

Plan = list[tuple[str, Stage]]


def run_plan(
    plan: Plan,
    ledger: Ledger,
    got: Got,
    done: Callable[[str], None],
    progress: bool | Callable[[int, int], None],
) -> None:
    """Each stage of ``plan`` in turn, its outcome folded into ``got`` (and the ledger) as it
    ends; ``done(name)`` after each (its time is the stage's).
    The progress hears each stage's name (:func:`said_stage`; ``True``: a bar of the stages,
    named as each starts, above the bars of its calls)."""
    if progress is not True:
        _each(plan, (ledger, got), done, lambda name, k, n: said_stage(progress, name, k, n))
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=len(plan), desc="doctor", unit="stage", leave=False)
    try:

        def tell(name: str, k: int, n: int) -> None:
            bar.set_description(f"doctor: {name}")
            bar.total, bar.n = n, k
            bar.refresh()

        _each(plan, (ledger, got), done, tell)
    finally:
        bar.close()


def said_stage(progress: bool | Callable[[int, int], None], name: str, k: int, n: int) -> None:
    """Stage ``k`` of ``n``, ``name``, starting, said to a progress callback: one with a
    ``stage`` method (the Lab's bar) is given the name, so the counts the stage's own calls
    report after it read as that stage's ('doctor: screen 3/12'); then it hears ``(k, n)``,
    the stages done of all."""
    if not callable(progress):
        return
    named = getattr(progress, "stage", None)
    if callable(named):
        named(name)
    progress(k, n)


def _each(
    plan: Plan,
    state: tuple[Ledger, Got],
    done: Callable[[str], None],
    tell: Callable[[str, int, int], None],
) -> None:
    ledger, got = state
    for k, (name, stage) in enumerate(plan):
        tell(name, k, len(plan))
        out = begin(ledger, name)
        try:
            got.fold(stage(ledger, got, out), ledger)
        except WorkerCancelledError:
            raise
        except BudgetSpentError:  # not a failure: the budget ended the search here
            ledger.skip(
                f"the {name} stage and those after it (the budget and its slack were spent)"
            )
            got.fold(out, ledger)  # what it measured before
            done(name)
            break
        except OrtlabError as err:  # keep what the stages before it measured
            if isinstance(err, WorkerTimeoutError) and ledger.budget.cut_short(err):
                ledger.skip(  # the budget stopped a call: said with the budget to ask for
                    f"the {name} stage and those after it (a call did not finish in the time "
                    "the budget left it)"
                )
            else:
                out.said.failures.append(
                    CandidateFailure(f"the {name} stage", error_text(err, 2000), name)
                )
                out.said.notes.append(
                    f"the doctor stopped at its {name} stage ({error_text(err, 300)}); the "
                    "findings above come from the stages before it"
                )
            got.fold(out, ledger)
            done(name)
            break
        done(name)
