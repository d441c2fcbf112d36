"""The graph view's data, one room per question: ``data`` (the nodes and edges drawn, with their
EP and time), ``blocks`` (the first picture: blocks named by what does the most work),
``inferred`` (what ONNX shape inference says of tensors and FLOPs), ``mapping`` (ORT's
optimized nodes mapped back to the original's), ``scopes`` (If/Loop bodies, scope by scope:
the branch that ran), ``roof`` (each node's place under the roofline)."""
