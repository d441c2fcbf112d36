"""The widgets: the only package that imports UI libraries (ipywidgets, anywidget, traitlets).

``graph`` (the graph view, drawn by the ES modules in
``graph/``... see ``graph.py``); ``diff`` (two linked graph views); ``netron`` (Netron served
locally). Imported on first use of ``ortlab.Lab`` / ``ortlab.GraphView`` / ``ortlab.graph``.
"""

from ortlab.views.graph.widget import GraphView, GraphWidget

__all__ = ["GraphView", "GraphWidget"]
