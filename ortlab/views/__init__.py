"""Views: results as text, HTML, plotly figures, reports and widgets.

One room per result over a small public kit. The kit every room shares: ``html`` (escaping,
tables, the style, the inputs and load lines), ``figure`` (the figures' template and layout, a
bar chart, the per-node shift chart of the two diffs) and ``colors`` (the one palette: EPs,
categories, verdicts). The rooms, each holding its result's text, HTML and figure together:
``model`` (the model summary), ``session`` (the session report), ``benchmark`` (a benchmark and
a config comparison), ``profile``, ``placement``, ``diff`` (run against run), ``versions``
(one model under two onnxruntime versions), ``optimization`` (levels, ablation, transformer
fusion), ``quantization`` (variants compared, the error per tensor), ``memory`` (the
footprint), ``accelerators`` (the what-if; the providers here), ``cost`` (cost model,
roofline), ``sweep``, ``generate``, ``throughput`` and ``doctor``. Besides them: ``snippet``
(plain onnxruntime code for a config), ``report`` (the self-contained HTML report),
``registry`` (registers every room's renderers with ``core.display`` on import of
``ortlab``); ``graph/`` (the graph view: pack, page, widget and its ES modules) and
``widgets/`` (the Lab and its rooms, history with its figure, diff, netron: with
``graph/widget.py`` the only modules that import ipywidgets/anywidget).

May import every layer below but the engine. plotly and the widget libraries are imported
inside the functions that need them, so ``import ortlab`` stays light. A new view of a result
is one function in its room, registered for the result's type; a new result is a new room. A
room imports the kit and, where it shows a part of another result (the session's lines under
a benchmark, the profile's conditions in a placement), that room's public function.
"""

from ortlab.views import registry as registry
