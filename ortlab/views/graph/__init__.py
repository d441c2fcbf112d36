"""The graph view, one feature folder: ``pack`` (GraphData into the wire form), ``page`` (the
module texts, netron's dagre, the standalone page and the report's state block: no UI library),
``widget`` (the anywidget: ``GraphView``, imported on first use by ``ortlab.GraphView``) and the
browser's ES modules beside them (``index.js`` the entry; ``wire``, ``data``, ``layout``,
``overlays``, ``labels``, ``draw``, ``interact``). The graph's facts come from
:mod:`ortlab.analysis.graph.data`; nothing here measures.
"""
