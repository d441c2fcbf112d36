"""Views: results as text, HTML, plotly figures, reports and widgets.

Lives here: ``render`` (text and HTML), ``plots`` (plotly figures), ``snippet`` (plain
onnxruntime code for a config), ``report`` (the self-contained HTML report), ``registry``
(registers every renderer with ``core.display``, on import of ``ortlab``), and ``widgets`` (the
Lab, the graph view and friends: the only modules that import ipywidgets/anywidget).

May import every layer below. plotly and the widget libraries are imported inside the functions
that need them, so ``import ortlab`` stays light. A new view of a result is one function here,
registered for the result's type.
"""

from ortlab.views import registry as registry
