"""The only package that imports UI libraries (ipywidgets, anywidget, traitlets)."""

from ortlab.widgets.graph import GraphWidget

__all__ = ["GraphWidget"]
