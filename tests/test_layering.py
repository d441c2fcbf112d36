"""The architecture as tests (ARCHITECTURE.md): the layer contracts in pyproject.toml hold, no
import circle exists inside ortlab, ``import ortlab`` loads no UI library, and the public API
keeps its promises (classes are classes, verbs do not hide modules, every result has the
same contract)."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import ortlab
from ortlab.core import display
from ortlab.core.result import Result

ROOT = Path(__file__).parent.parent
UI_MODULES = ("ipywidgets", "anywidget", "traitlets", "IPython", "plotly", "tqdm", "pandas")


def test_core_import_loads_no_ui_module() -> None:
    code = (
        "import sys, json, ortlab; "
        f"print(json.dumps([m for m in {UI_MODULES!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


_NO_ORT_HERE = """
import sys, tempfile, pathlib, ortlab
m = ortlab.examples.load("squeezenet")  # built here; its BatchNorm-free zoo weights, no run
assert m.summary.problems == [], m.summary.problems  # the runtime's limits, from the worker
eps = ortlab.providers()
lab = ortlab.Lab(ortlab.examples.load("conv_bn_relu"), run_on_start=False, synchronous=True)
lab.run()
out = pathlib.Path(tempfile.mkdtemp()) / "r.html"
ortlab.report(lab.model, placement=lab.placement, benchmark=lab.benchmark_result, path=out)
print(eps.ort_version, ",".join(eps.in_build), ",".join(eps.loadable))
print(sorted(k for k in sys.modules if k.split(".")[0] == "onnxruntime"))
"""


def test_the_users_process_never_imports_onnxruntime() -> None:
    """ORT runs in the worker only: loading a model (its limits checked), ortlab.providers(),
    a Lab and its run, and a report leave onnxruntime unimported in the user's process; the
    facts the worker measured are plain onnxruntime's (imported here, in the test)."""
    import onnxruntime as ort

    out = subprocess.run(
        [sys.executable, "-c", _NO_ORT_HERE],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    facts, imported = out.stdout.strip().splitlines()[-2:]
    version, in_build, loadable = facts.split(" ")
    assert imported == "[]"
    assert version == ort.__version__
    assert set(ort.get_available_providers()) <= set(in_build.split(","))
    assert loadable.split(",")[-1] == "CPUExecutionProvider"


def test_the_runtime_limits_are_measured_in_the_worker_and_match_in_place() -> None:
    from ortlab.core.runtime import limits
    from ortlab.engine.runtime import measure_limits
    from ortlab.engine.worker import get_worker

    assert get_worker().isolated
    assert limits() == measure_limits()  # the worker's answer, and this process's own
    assert limits().max_opset[""] >= 21


def test_import_linter_contracts_hold() -> None:
    """`lint-imports` with the contracts of pyproject.toml: the layers (cli > views > diagnosis
    > analysis > engine > core), "only the views import UI and plotting libraries", "views
    never import the engine" and "only the engine imports onnxruntime"."""
    exe = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def _import_graph(*, types: bool = False) -> dict[str, set[str]]:
    """ortlab's modules -> the ortlab modules each imports (``types``: the imports under
    ``if TYPE_CHECKING:`` too)."""
    import grimp

    # no cache: a cached graph keyed by file times once outlived an edit here
    graph = grimp.build_graph("ortlab", exclude_type_checking_imports=not types, cache_dir=None)
    return {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("ortlab")}
        for m in graph.modules
        if m.startswith("ortlab")
    }


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_inside_ortlab() -> None:
    """Function-level imports count (grimp sees them): a lazy import cannot hide a circle.
    Only the clients of the public API (the CLI and the Lab) import the top-level package."""
    edges = _import_graph()
    assert _cycles(edges) == []
    # nor at the type level: a circle drawn only for the type checker is still a circle a
    # reader walks (a package's __init__ that only hands names on is no part of one, nor is
    # the public namespace, which names the Lab for the type checker and loads it lazily)
    faces = {m for m in edges if _is_face(m)} | {"ortlab"}
    typed = {m: deps - faces for m, deps in _import_graph(types=True).items() if m not in faces}
    assert _cycles(typed) == []
    users = [m for m, deps in edges.items() if "ortlab" in deps and m != "ortlab"]
    clients = sorted({"ortlab.cli" if m.startswith("ortlab.cli.") else m for m in users})
    assert clients == ["ortlab.cli", "ortlab.views.lab.lab"], clients


def _is_face(module: str) -> bool:
    """A package's __init__ that defines nothing: it only hands its modules' names on."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith("__init__.py"):
        return False
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in tree.body)


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_classes_are_classes_and_verbs_do_not_hide_modules() -> None:
    assert isinstance(ortlab.Lab, type) and isinstance(ortlab.GraphView, type)
    for verb in (
        "benchmark",
        "profile",
        "placement",
        "compare",
        "doctor",
        "report",
        "quantize",
        "optimization_diff",
        "graph",
    ):
        assert callable(getattr(ortlab, verb))
        assert not hasattr(getattr(ortlab, verb), "__path__")
    dirs = [p for p in (ROOT / "ortlab").iterdir() if p.is_dir() and p.name[0] != "_"]
    layers = {p.name for p in dirs if (p / "__init__.py").exists()}
    assert layers == {"core", "engine", "analysis", "diagnosis", "views", "cli"}
    data = [p for p in dirs if p.name not in layers]  # package data (the bundled decoders)
    assert [p.name for p in data] == ["decoders"] and not list(data[0].rglob("*.py"))
    assert not set(ortlab.__all__) & layers


RESULTS = sorted(
    (c for c in vars(ortlab).values() if isinstance(c, type) and issubclass(c, Result)),
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", RESULTS, ids=lambda c: c.__name__)
def test_every_result_has_the_contract(cls: type) -> None:
    """to_json/from_json (Result), to_pandas documented, and html/text/plot renderers
    registered by the views; GraphData is the graph view's input and has no figure."""
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert hasattr(cls, "to_json") and hasattr(cls, "from_json")
    assert callable(getattr(cls, "to_pandas", None)), f"{cls.__name__} has no to_pandas"
    assert (cls.to_pandas.__doc__ or "").strip(), "to_pandas is undocumented"
    # print() says what it is, the verdict and the counts: its own __repr__, not the
    # dataclass's dump of every field (a DivergenceResult's was ~100 KB on 1,000 tensors)
    assert not hasattr(cls.__repr__, "__wrapped__"), f"{cls.__name__} prints every field"
    wanted = () if cls.__name__ == "GraphData" else ("html", "text", "plot")
    for fmt in wanted:
        assert display.has(cls, fmt), f"{cls.__name__} has no {fmt} renderer"


def test_every_renderer_names_the_result_it_renders() -> None:
    """Each registered renderer's subject is annotated with its registered class (mypy then
    checks each registry row against it: a renderer of another result, or a field renamed
    under one, is a type error), never Any."""
    import inspect

    from ortlab.views.registry import RENDERERS

    wrong = []
    for cls, fmt, fn in RENDERERS:
        subject = next(iter(inspect.signature(fn).parameters.values()))
        if subject.annotation != cls.__name__:
            wrong.append(f"{fn.__module__}.{fn.__name__} ({fmt}): {subject.annotation}")
    assert not wrong, wrong


def test_worker_tasks_are_called_by_reference() -> None:
    """The worker seam is typed: every task is called by its function (engine.calls.run checks
    the arguments against the task's signature with mypy), never by a name in a string that a
    rename would leave behind."""
    import ast

    by_name = []
    for path in sorted((ROOT / "ortlab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            first = node.args[0]
            named = isinstance(first, ast.Constant) and isinstance(first.value, str)
            if named and name in {
                "call",
                "run",
                "run_task",
                "run_model_task",
                "in_worker",
                "model_call",
            }:
                by_name.append(f"{path.relative_to(ROOT)}:{node.lineno} {first.value!r}")
    assert by_name == []
    from ortlab.engine import tasks_timing
    from ortlab.engine.worker import resolve_task, task_name

    assert resolve_task(task_name(tasks_timing.interleaved)) is tasks_timing.interleaved


def _task_functions() -> list[Any]:
    """Every worker task: a public function of an engine task module (or a measuring
    function the worker runs) whose first parameter is ``progress``."""
    import importlib
    import inspect

    found = []
    engine = ROOT / "ortlab" / "engine"
    task_modules = sorted(p.stem for p in engine.glob("tasks*.py"))  # found, not listed
    for name in (*task_modules, "providers", "runtime", "examples"):
        module = importlib.import_module(f"ortlab.engine.{name}")
        for fn_name, fn in vars(module).items():
            if fn_name.startswith("_") or not inspect.isfunction(fn):
                continue
            if fn.__module__ != module.__name__:
                continue
            params = list(inspect.signature(fn).parameters)
            if params and params[0] == "progress":
                found.append(fn)
    return found


def _loose(hint: Any) -> bool:
    """Whether a reply type hands the caller something to read by key: Any, or a dict whose
    values are not records (a dict may map data — levels, tensors, output names — to records
    or arrays, never field names to values)."""
    import typing

    import numpy as np

    if hint is Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (dict, Mapping):
        value = args[1] if len(args) == 2 else Any
        record = dataclasses.is_dataclass(value) or value is np.ndarray
        return not record
    return any(_loose(a) for a in args if a is not Ellipsis)


def test_every_task_replies_with_a_typed_record() -> None:
    """A model task's reply is a record whose fields mypy checks (engine.replies), never a
    dict read by key: the rule that made benchmark, profile, placement, the transforms, the
    what-if and the footprint tasks reply with records cannot regress."""
    import typing

    tasks = _task_functions()
    names = {f.__name__ for f in tasks}
    assert {
        "benchmark",
        "profile",
        "placement",
        "outputs",
        "optimize_levels",
        "quantize",
        "tensor_errors",
        "transformer_optimize",
        "whatif",
        "footprint",
        "interleaved",
    } <= names, names
    loose = [
        f"{f.__module__}.{f.__name__}" for f in tasks if _loose(typing.get_type_hints(f)["return"])
    ]
    assert loose == []
    # and every record a task sends back is defined in engine.replies, the one home of replies
    from ortlab.engine import replies

    elsewhere = [
        f"{f.__module__}.{f.__name__} -> {r.__module__}.{r.__qualname__}"
        for f in tasks
        for r in _records(typing.get_type_hints(f)["return"])
        if r.__module__ != replies.__name__ and r.__module__.startswith("ortlab.engine")
    ]
    assert elsewhere == [], elsewhere
    assert {"shapes", "peaks", "throughput"} <= names, "tasks_cost, tasks_peaks, tasks_throughput"


def _records(hint: Any) -> list[type]:
    """The dataclasses a return annotation names, at any depth (dict values, list items)."""
    import typing

    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return [hint]
    return [r for a in typing.get_args(hint) if a is not Ellipsis for r in _records(a)]


def test_the_reply_rule_sees_a_dict_read_by_key() -> None:
    from ortlab.engine.replies import SavedLevel

    assert _loose(Any) and _loose(dict[str, Any]) and _loose(list[list[dict[str, Any]]])
    assert _loose(dict[str, dict[str, float]]) and _loose(dict[str, float])
    assert not _loose(dict[str, SavedLevel]) and not _loose(tuple[list[str], list[str]])


def test_every_module_is_small_and_says_what_it_owns() -> None:
    """No module of the package over 600 lines as the formatter lays it out (the code is
    formatted, and no statement switches the formatter off: a size limit is met by splitting
    a module by concept, never by packing lines), and each opens with a docstring (its first
    sentence says what the module owns)."""
    import ast

    ruff = Path(sys.executable).parent / "ruff"
    unformatted = subprocess.run(
        [str(ruff), "format", "--check", "--quiet", "ortlab"], cwd=ROOT, check=False
    ).returncode
    too_long, silent, skipped = [], [], []
    for path in sorted((ROOT / "ortlab").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 600:
            too_long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
        if not ast.get_docstring(ast.parse(text)):
            silent.append(str(path.relative_to(ROOT)))
        if "fmt: " + "skip" in text or "fmt: " + "off" in text:
            skipped.append(str(path.relative_to(ROOT)))
    assert unformatted == 0, "ruff format would change the package: run ruff format ortlab"
    assert too_long == [] and silent == [] and skipped == [], (too_long, silent, skipped)


def test_views_reach_the_engine_through_no_attribute() -> None:
    """The import contract sees imports, not ``ortlab.engine.worker.get_worker()`` reached
    through the top-level package: no view names the engine at all (the Lab asks
    ``analysis.labrun`` to start the worker and to cancel a call)."""
    found = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "ortlab" / "views").rglob("*.py"))
        if "ortlab.engine" in p.read_text(encoding="utf-8")
    ]
    assert found == []


# Every Any left in a signature, with why it stays (issue 48: under 150, each with a reason).
# A new one is a conscious choice: add it here with its reason, or type it.
_JSON = "a JSON value: its shape is the file's, read by key"
_TASK = "a worker task's result, fetched by the task's name (calls.run types it by the task)"
_ORT_RUN = "what onnxruntime's run returns: arrays, lists, maps or OrtValues, per output"
_PLOTLY = "keyword options passed through to plotly, which ships no types"
_WIDGET = "an ipywidgets/traitlets payload (untyped library)"
_QNN = "QNN provider options: each key its own type, checked by QNN"
ANY_KEPT = {
    "ortlab/__init__.py:graph": _PLOTLY + " (the graph view's options: color_by, expanded, …)",
    "ortlab/__init__.py:__getattr__": "the package's lazy attributes: any verb or class",
    "ortlab/cli/args.py:write_node_data": "results by figure name for model_explorer_data",
    "ortlab/core/builder.py:op": "ONNX attributes for onnx.helper.make_node (any attr type)",
    "ortlab/core/config.py:to_dict": "a config's fields by name (each its own type)",
    "ortlab/core/decoder.py:_shape_facts": _JSON + " (genai_config.json, config.json)",
    "ortlab/core/decoder.py:_decoder_start": _JSON + " (config.json)",
    "ortlab/core/decoder.py:_read_json": _JSON,
    "ortlab/core/display.py:render": "a renderer's output: text, HTML or a figure, per format",
    "ortlab/core/inputs.py:_synth_int": "np.iinfo takes integer dtypes only: np.dtype[Any]",
    "ortlab/core/result.py:to_dict": "msgspec's builtins of any result",
    "ortlab/diagnosis/doctor.py:doctor": "eval_data: feeds dicts, a DataFrame or a folder",
    "ortlab/diagnosis/search.py:accuracy": "eval_data: feeds dicts, a DataFrame or a folder",
    "ortlab/engine/calls.py:call": _TASK,
    "ortlab/engine/children.py:run_child": _JSON + " (a child process's answer)",
    "ortlab/engine/tasks.py:to_numpy": _ORT_RUN,
    "ortlab/engine/tasks.py:make_runner": _ORT_RUN,
    "ortlab/engine/tasks.py:bound": _ORT_RUN,
    "ortlab/engine/tasks.py:with_ort_values": _ORT_RUN,
    "ortlab/engine/tasks.py:plain": _ORT_RUN,
    "ortlab/engine/worker.py:call": _TASK,
    "ortlab/engine/worker.py:_wait": _TASK,
    "ortlab/views/figure.py:layout": _PLOTLY,
    "ortlab/views/figure.py:bars": _PLOTLY,
    "ortlab/views/generate.py:weight_cells": "a row of a weights table (itertuples)",
    "ortlab/views/graph/widget.py:__init__": _WIDGET,
    "ortlab/views/graph/widget.py:_check_color": _WIDGET,
    "ortlab/views/lab/tabcontrols.py:__init__": _QNN,
    "ortlab/views/lab/lab.py:__init__": _QNN,
    "ortlab/views/lab/lab.py:__getattr__": "the Lab's controls by name (lab.level is a widget)",
    "ortlab/views/lab/lab.py:_on_top_node": _WIDGET,
    "ortlab/views/lab/lab.py:_on_generation_node": _WIDGET,
    "ortlab/views/lab/lab.py:_repr_mimebundle_": _WIDGET + " (IPython's display options)",
    "ortlab/views/lab/state.py:keep": "results by field name into dataclasses.replace",
    "ortlab/views/modelexplorer.py:node_data": _JSON + " (Model Explorer's node data)",
    "ortlab/views/profile.py:profile_figure": _PLOTLY,
    "ortlab/views/registry.py:_row": "a registry row holds a renderer of any result class",
    "ortlab/views/widgets/diff.py:_follow": _WIDGET,
}


def test_any_in_a_signature_is_rare_and_said() -> None:
    """Any in a function's signature (its parameters and return) is under 150 in all of
    ortlab, and each function that keeps one is listed in ANY_KEPT with why."""
    import ast

    root = Path(ortlab.__file__).parent
    count, found = 0, set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            notes = [p.annotation for p in params if p is not None and p.annotation is not None]
            texts = [ast.unparse(t) for t in [*notes, node.returns] if t is not None]
            n = sum(
                t.replace("[", " ").replace("]", " ").replace(",", " ").split().count("Any")
                for t in texts
            )
            if n:
                count += n
                found.add(f"ortlab/{path.relative_to(root).as_posix()}:{node.name}")
    assert count < 150, count
    assert found - set(ANY_KEPT) == set(), sorted(found - set(ANY_KEPT))
    assert set(ANY_KEPT) - found == set(), f"typed now, drop from ANY_KEPT: {set(ANY_KEPT) - found}"


_BUILDERS = {"quantize", "to_fp16", "transformer_optimize"}
"""Public verbs a doctor stage may call: each builds a model variant and measures nothing, so
no input is resolved twice."""


def test_no_doctor_stage_calls_a_public_verb() -> None:
    """A stage measures through a verb's Run-taking body on ``run.derive(...)`` (ARCHITECTURE:
    diagnosis), never through the public verb, which would load, check and resolve the inputs
    again: no module of ``ortlab/diagnosis`` imports one (by any alias)."""
    import inspect

    verbs = {
        n
        for n in ortlab.__all__
        if inspect.isfunction(f := getattr(ortlab, n, None))
        and f.__module__.startswith("ortlab.analysis")
    }
    assert {"profile", "whatif", "kl_divergence", "quantization_error"} <= verbs  # the rule sees
    found = []
    for path in sorted((ROOT / "ortlab" / "diagnosis").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ortlab"):
                found += [
                    f"{path.name}: {a.name} from {node.module}"
                    for a in node.names
                    if a.name in verbs - _BUILDERS
                ]
            if (
                isinstance(node, ast.Attribute)
                and node.attr in verbs - _BUILDERS
                and isinstance(node.value, ast.Name)
                and node.value.id == "ortlab"
            ):
                found.append(f"{path.name}: ortlab.{node.attr}")
    assert not found, found
