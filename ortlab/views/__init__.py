"""Views: results as text, HTML, plotly figures, reports and widgets.

Lives here: the kits every view shares — ``html`` (escaping, tables, the style, the load
line), ``figure`` (the figures' template and layout), ``colors`` (the one palette: EPs,
categories, verdicts) —; the renderers by result — ``render`` (model, session, benchmark,
profile, placement), ``render_comparison``, ``render_optimization``, ``render_quantization``,
``render_memory``, ``render_accelerators``, ``render_cost``, ``render_sweep``,
``render_throughput``, ``render_versions``, ``render_doctor`` —; the figures — ``plots``,
``profile_figures`` —; ``snippet`` (plain onnxruntime code for a config), ``report`` (the
self-contained HTML report), ``registry`` (registers every renderer with ``core.display`` on
import of ``ortlab``); ``graph/`` (the graph view: pack, page, widget and its ES modules) and
``widgets/`` (the Lab and its rooms, history, diff, netron: with ``graph/widget.py`` the only
modules that import ipywidgets/anywidget).

May import every layer below but the engine. plotly and the widget libraries are imported
inside the functions that need them, so ``import ortlab`` stays light. A new view of a result
is one function here, registered for the result's type.
"""

from ortlab.views import registry as registry
