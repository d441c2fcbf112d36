"""No ``_private`` name is imported or used across modules of the package (issue 38).

Every module under ``ortlab/`` is parsed with :mod:`ast` (nothing is imported) and a finding is

(a) an import of a single-underscore name from another ortlab module:
    ``from ortlab.engine.tasks import _session`` (relative imports resolved the same way).
    Importing a public name under a private alias is fine: ``from ortlab.core.eps import alias
    as _short``, ``from ortlab.engine import providers as _providers``;

(b) an attribute ``X._name`` (single leading underscore; ``__dunder__`` names and
    ``_sunder_`` protocol names such as IPython's ``_repr_html_`` are not checked) where
    ``X`` is

    - an ortlab module this module imported (``tasks._session`` after ``from ortlab.engine
      import tasks``, ``ortlab.engine.tasks._session`` after ``import ortlab.engine.tasks``),
    - or a variable named ``lab``: a Lab used from outside its class (``lab._show(...)``).

``self._x`` and ``cls._x`` are a class's own and never a finding. Anything a module needs from
another is public there: renamed without the underscore (and in ``__all__`` where the module
has one).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent


def _private(name: str) -> bool:
    """A single leading underscore, not a ``__dunder__`` nor a ``_sunder_`` protocol name
    (IPython's ``_repr_html_``, ``_repr_mimebundle_``; enum's ``_missing_``)."""
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` (``ortlab.engine.tasks``) names a module or package of the tree."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_from(node: ast.ImportFrom, module: str, package: bool) -> str:
    """The absolute module of ``from … import …`` in ``module`` (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if package else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _imports(
    tree: ast.Module, module: str, package: bool
) -> tuple[list[tuple[int, str]], dict[str, str]]:
    """Finding (a), and each name bound to an ortlab module (``tasks`` ->
    ``ortlab.engine.tasks``, ``ortlab`` after ``import ortlab.engine.tasks``)."""
    found: list[tuple[int, str]] = []
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "ortlab":
                    modules[a.asname or "ortlab"] = a.name if a.asname else "ortlab"
        elif isinstance(node, ast.ImportFrom):
            source_module = _imported_from(node, module, package)
            if source_module.split(".")[0] != "ortlab" or source_module == module:
                continue
            for a in node.names:
                if _private(a.name):
                    found.append((node.lineno, f"from {source_module} import {a.name}"))
                if _is_module(f"{source_module}.{a.name}"):
                    modules[a.asname or a.name] = f"{source_module}.{a.name}"
    return found, modules


def private_uses(source: str, module: str, package: bool = False) -> list[tuple[int, str]]:
    """The findings (a) and (b) of the module docstring in ``source``, the text of ``module``
    (``package``: it is a package's ``__init__``), as (line, what) pairs."""
    tree = ast.parse(source)
    found, modules = _imports(tree, module, package)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        chain = _dotted(node.value)
        if chain is None:
            continue
        first, _, rest = chain.partition(".")
        if first == "lab":
            found.append((node.lineno, f"{chain}.{node.attr}"))
        elif first in modules:
            target = ".".join(filter(None, [modules[first], rest]))
            if _is_module(target) and target != module:
                found.append((node.lineno, f"{chain}.{node.attr}"))
    return found


def _findings() -> dict[str, list[int]]:
    """Every finding in the package, keyed ``path: what``, with its lines."""
    out: dict[str, list[int]] = {}
    for path in sorted((ROOT / "ortlab").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        uses = private_uses(text, _module_name(path), package=path.name == "__init__.py")
        for line, what in uses:
            out.setdefault(f"{path.relative_to(ROOT).as_posix()}: {what}", []).append(line)
    return out


def _private_defs() -> set[str]:
    """Every private method name an ortlab class defines."""
    names = set()
    for path in sorted((ROOT / "ortlab").rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(cls, ast.ClassDef):
                names |= {
                    f.name
                    for f in cls.body
                    if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and _private(f.name)
                }
    return names


def private_calls(source: str, defined: set[str]) -> list[tuple[int, str]]:
    """(c) a call ``X._m(...)`` of a private method ortlab defines, where ``X`` is not
    ``self``, ``cls`` or ``super()``: a class's private methods are called by the class alone
    (another module that needs one calls a public function instead). Private names of other
    libraries (``os._exit``) are theirs to keep."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, owner = node.func.attr, node.func.value
        if not _private(attr) or attr not in defined:
            continue
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
            continue
        found.append((node.lineno, ast.unparse(node.func)))
    return found


def test_no_private_method_is_called_from_outside_its_class() -> None:
    defined = _private_defs()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted((ROOT / "ortlab").rglob("*.py"))
        for line, what in private_calls(path.read_text(encoding="utf-8"), defined)
    ]
    assert offenders == [], "call a public function instead:\n" + "\n".join(offenders)


def test_the_call_check_sees_a_private_method_called_from_outside() -> None:
    source = """
class A:
    def f(self, ledger):
        self._time(1)
        super()._time(2)
        ledger._time(3)
        os._exit(0)
"""
    assert private_calls(source, {"_time"}) == [(6, "ledger._time")]


def test_no_private_name_crosses_a_module() -> None:
    offenders = [f"{key} (line {', '.join(map(str, lines))})" for key, lines in _findings().items()]
    assert offenders == [], "make these public in their module:\n" + "\n".join(offenders)


def test_the_check_sees_each_kind_and_passes_the_allowed() -> None:
    source = """
import ortlab.engine.tasks
import ortlab.engine.tasks as t
from ortlab.engine import tasks
from ortlab.engine import providers as _providers
from ortlab.core.eps import alias as _short
from ortlab.engine.tasks import _session, profile
from .tasks import _runner
from ortlab.cli.args import load_model

class A:
    def f(self, lab):
        self._own = cls._x = 1
        lab._show("Overview")
        tasks._fingerprint(1)
        t._rss()
        ortlab.engine.tasks._run_error
        other._fine, lab.show, lab.__dict__, lab._repr_html_()
        _providers._core, tasks.__name__
        return load_model._cache
"""
    found = private_uses(source, "ortlab.engine.tasks_demo")
    assert sorted(what for _, what in found) == [
        "_providers._core",
        "from ortlab.engine.tasks import _runner",
        "from ortlab.engine.tasks import _session",
        "lab._show",
        "ortlab.engine.tasks._run_error",
        "t._rss",
        "tasks._fingerprint",
    ]
