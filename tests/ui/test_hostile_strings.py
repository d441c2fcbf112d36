"""Every string a model carries is inert in every page ortlab writes, one field at a time.

A tiny model gets a hostile payload in one field (graph name, node name, op type, domain, tensor
names, doc strings, producer, metadata keys and values, attribute values, subgraph names); the
graph page (``GraphView.to_html``) and the report (``ortlab.report``, which the Lab's export
calls) are opened in headless Chromium twice: with the page's own Content-Security-Policy, and
with the CSP bypassed, so the escaping alone is tested too. Each time: no script ran
(``window.__pwned``), no dialog, no page error, no request left the page, the payload is shown
as text where the page shows that field, and the page rendered (graph painted, charts drawn).
The anywidget path (JupyterLab) carries the same strings as widget state, i.e. data only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

import ortlab
from ortlab.views.graph.widget import GraphView
from tests.graphwire import node_strings
from tests.test_report_contents import assert_no_private_paths, benchmark_result, profile_result

pytestmark = pytest.mark.ui

PAYLOAD = (
    "</script><script>window.__pwned=1</script>"
    '<img src=x onerror="window.__pwned=1">'
    '"--><svg onload=window.__pwned=1>'
)
F = TensorProto.FLOAT


def _model(edit: Callable[[onnx.ModelProto], None]) -> onnx.ModelProto:
    """y = x + x, named plainly; ``edit`` puts the payload into one field."""
    node = helper.make_node("Add", ["x", "x"], ["y"], name="add")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [1, 4])],
        [helper.make_tensor_value_info("y", F, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    edit(model)
    return model


def _rename(model: onnx.ModelProto, old: str) -> None:
    g = model.graph
    for vi in [*g.input, *g.output]:
        if vi.name == old:
            vi.name = PAYLOAD
    for n in g.node:
        n.input[:] = [PAYLOAD if t == old else t for t in n.input]
        n.output[:] = [PAYLOAD if t == old else t for t in n.output]


def _set_domain(model: onnx.ModelProto) -> None:
    model.graph.node[0].domain = PAYLOAD
    model.opset_import.append(helper.make_opsetid(PAYLOAD, 1))


def _subgraph(model: onnx.ModelProto) -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"], name=PAYLOAD)],
        PAYLOAD,
        [],
        [helper.make_tensor_value_info("t", F, [1, 4])],
    )
    model.graph.node[0].attribute.append(helper.make_attribute("body", body))


def _set(path: str) -> Callable[[onnx.ModelProto], None]:
    def edit(model: onnx.ModelProto) -> None:
        owner: Any = model
        *parents, leaf = path.split(".")
        for p in parents:
            owner = owner.node[0] if p == "node" else getattr(owner, p)
        setattr(owner, leaf, PAYLOAD)

    return edit


@dataclasses.dataclass(frozen=True)
class Field:
    edit: Callable[[onnx.ModelProto], None]
    in_graph: bool
    """The graph page shows this field (title or node details)."""
    in_report: bool
    """The report's Model section shows this field."""


FIELDS = {
    "graph_name": Field(_set("graph.name"), True, True),
    "node_name": Field(_set("graph.node.name"), True, False),
    "op_type": Field(_set("graph.node.op_type"), True, True),
    "domain": Field(_set_domain, True, True),
    "input_tensor": Field(lambda m: _rename(m, "x"), True, True),
    "output_tensor": Field(lambda m: _rename(m, "y"), True, True),
    "model_doc_string": Field(_set("doc_string"), False, True),
    "graph_doc_string": Field(_set("graph.doc_string"), False, True),
    "node_doc_string": Field(_set("graph.node.doc_string"), False, False),
    "producer_name": Field(_set("producer_name"), False, True),
    "producer_version": Field(_set("producer_version"), False, True),
    "metadata_key": Field(lambda m: helper.set_model_props(m, {PAYLOAD: "v"}), False, True),
    "metadata_value": Field(lambda m: helper.set_model_props(m, {"k": PAYLOAD}), False, True),
    "attribute_string": Field(
        lambda m: m.graph.node[0].attribute.append(helper.make_attribute("note", PAYLOAD)),
        True,
        False,
    ),
    "attribute_strings": Field(
        lambda m: m.graph.node[0].attribute.append(helper.make_attribute("notes", [PAYLOAD])),
        True,
        False,
    ),
    "subgraph": Field(_subgraph, True, False),  # the graph view opens bodies in place
}


@pytest.fixture(params=["page-csp", "csp-bypassed"])
def hostile_page(request: Any, browser: Any) -> Iterator[Any]:
    """A page that records dialogs, errors and every request it makes."""
    context = browser.new_context(
        viewport={"width": 1100, "height": 700}, bypass_csp=request.param == "csp-bypassed"
    )
    page = context.new_page()
    page.dialogs, page.errors, page.requests = [], [], []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("request", lambda r: page.requests.append(r.url))
    yield page
    context.close()


def _assert_inert(page: Any, path: Path, scripts: int) -> None:
    """``scripts``: how many executable script elements the page itself has."""
    assert page.evaluate("typeof window.__pwned") == "undefined", "a script from the model ran"
    assert page.dialogs == [], f"dialogs opened: {page.dialogs}"
    assert page.errors == [], f"page errors: {page.errors}"
    left = [u for u in page.requests if u != path.as_uri() and not u.startswith("blob:")]
    assert left == [], f"requests left the page: {left}"
    assert page.locator("svg[onload], img[onerror]").count() == 0, "model markup is in the DOM"
    own = page.locator("script:not([type='application/json'])").count()
    assert own == scripts, f"{own} script elements, the page has {scripts}: one from the model"


def _static_checks(html: str) -> None:
    assert PAYLOAD not in html, "the payload is in the file unescaped"
    policy = re.search(r'Content-Security-Policy["\x27] content="([^"]+)"', html)
    assert policy, "the page has a Content-Security-Policy"
    assert "'unsafe-inline'" not in policy.group(1).split("script-src", 1)[1].split(";")[0]


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_graph_page(field: str, hostile_page: Any, tmp_path: Path) -> None:
    page = hostile_page
    m = ortlab.load(_model(FIELDS[field].edit))
    widget = ortlab.graph(m)
    assert isinstance(widget, GraphView)
    path = widget.to_html(tmp_path / "graph.html")
    _static_checks(path.read_text(encoding="utf-8"))
    page.goto(path.as_uri())
    page.locator(".ortlab-status", has_text="layout").wait_for(timeout=30_000)
    painted = page.evaluate("""() => {
        const c = document.querySelector('.ortlab-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""")
    assert painted > 500, "the graph was painted"
    page.fill(".ortlab-search", "__pwned")  # a node named so: centred (else the only node is)
    page.press(".ortlab-search", "Enter")
    box = page.locator(".ortlab-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    tip = page.locator(".ortlab-tooltip")
    tip.wait_for(state="visible", timeout=5_000)
    shown = f"{page.title()}\n{tip.text_content()}"
    if FIELDS[field].in_graph:
        assert PAYLOAD in shown, f"{field}: the payload is shown as text"
    _assert_inert(page, path, scripts=1)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_report_page(field: str, hostile_page: Any, tmp_path: Path) -> None:
    page = hostile_page
    m = ortlab.load(_model(FIELDS[field].edit))
    # results as the model's strings reach them: ORT names nodes and ops after the model
    profile = profile_result(model=m.name, node=PAYLOAD, op_type=PAYLOAD)
    bench = benchmark_result(model=m.name, feeds=f"{PAYLOAD}: float32[1, 4]")
    path = ortlab.report(
        m, compute=False, profile=profile, benchmark=bench, path=tmp_path / "report.html"
    )
    _static_checks(path.read_text(encoding="utf-8"))
    page.goto(path.as_uri())
    page.wait_for_function(
        "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4", timeout=60_000
    )
    model_section = page.locator("section", has=page.locator("h2", has_text="Model")).first
    if FIELDS[field].in_report:
        assert PAYLOAD in model_section.inner_text(), f"{field}: shown as text in the Model section"
    assert PAYLOAD in page.locator("body").inner_text(), "result strings are shown as text"
    _assert_inert(page, path, scripts=3)  # plotly.js, the figure loader, the graph view


def test_widget_state_carries_model_strings_as_data() -> None:
    """JupyterLab's path: the strings travel as widget state (JSON data) and graph.js puts
    them into the page with textContent / canvas fillText only."""

    def every_field(m: onnx.ModelProto) -> None:
        for name, f in FIELDS.items():
            if name != "input_tensor":  # one renamed tensor is enough (and names stay unique)
                f.edit(m)

    w = ortlab.graph(ortlab.load(_model(every_field)))
    assert isinstance(w, GraphView)
    state = w.get_state()
    assert state["data"]["model"] == PAYLOAD
    node = node_strings(state["data"], 0)
    assert node["name"] == PAYLOAD and node["op_type"] == PAYLOAD and node["domain"] == PAYLOAD
    assert PAYLOAD in node["outputs"] and node["attrs"]["note"] == PAYLOAD
    bundle = w._repr_mimebundle_()
    data: dict[str, Any] = (bundle[0] if isinstance(bundle, tuple) else bundle) or {}
    assert set(data) <= {"text/plain", "application/vnd.jupyter.widget-view+json"}, data.keys()
    assert PAYLOAD not in str(data.get("application/vnd.jupyter.widget-view+json"))
    assert PAYLOAD not in w._esm
    folder = Path(ortlab.__file__).parent / "views" / "graph"
    source = "\n".join(f.read_text(encoding="utf-8") for f in sorted(folder.glob("*.js")))
    source = re.sub(r"^\s*//.*$", "", source, flags=re.M)  # its header names innerHTML
    sinks = re.findall(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|"
        r"new Function",
        source,
    )
    assert sinks == [], f"the graph view's modules write markup: {sinks}"


@pytest.fixture(scope="module")
def lab_export(tmp_path_factory: Any) -> Path:
    """The Lab's export of a model whose runnable fields all carry the payload (the Lab runs
    it, so op types and domains stay real)."""
    runnable = (
        "graph_name",
        "node_name",
        "input_tensor",
        "output_tensor",
        "model_doc_string",
        "graph_doc_string",
        "producer_name",
        "metadata_value",
    )

    def edit(m: onnx.ModelProto) -> None:
        for name in runnable:
            FIELDS[name].edit(m)
        m.graph.output[0].name = m.graph.node[0].output[0] = "y"  # two tensors cannot share it

    lab: Any = ortlab.Lab(ortlab.load(_model(edit)), synchronous=True, runs=5)
    assert lab.error.value == "", lab.error.value
    return Path(lab.export_report(tmp_path_factory.mktemp("lab") / "lab.html"))


def test_lab_export(lab_export: Path, hostile_page: Any) -> None:
    page = hostile_page
    _static_checks(lab_export.read_text(encoding="utf-8"))
    assert_no_private_paths(lab_export.read_text(encoding="utf-8"))
    page.goto(lab_export.as_uri())
    page.wait_for_function(
        "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 1", timeout=60_000
    )
    model = page.locator("section", has=page.locator("h2", has_text="Model")).first
    assert PAYLOAD in model.inner_text(), "the model's strings as text"
    _assert_inert(page, lab_export, scripts=3)  # plotly.js, the figure loader, the graph view
