"""A bound run and its per-step rebinding, called the cheapest way onnxruntime's Python binding
allows.

``InferenceSession.run_with_iobinding(binding)`` checks WebGPU graph capture (a call into the
binding and a look at the run options) before it calls the session, and with no run options the
binding builds a default ``RunOptions`` for every call; ``IOBinding.bind_cpu_input`` turns a
numpy array into a tensor each time. On a decoder whose step takes tens of µs these cost
10-15 µs a step once a run has left the caches cold (measured interleaved on the bundled genai
int4 decoder, a decode step's run: the public call 87.5 µs, the binding's own call with one
``RunOptions`` kept 73.6 µs, onnxruntime-genai's whole C++ step 82.9 µs; rebinding the mask
from a numpy view 3.3 µs, an OrtValue made before the steps 0.9 µs). A generator written in C++
pays none of it, so a greedy loop to be read beside one must not either.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["BoundCalls"]


class BoundCalls:
    """``run()`` runs the session on the binding; ``bind(name, held(value))`` binds an OrtValue
    as an input (``held`` once, before the timed steps). Both go to the Python binding's own
    entries (what the public methods call after their checks) with one ``RunOptions`` made
    here; to the public methods where those entries are missing (another onnxruntime) or
    WebGPU graph capture is on (its checks then matter)."""

    def __init__(self, sess: ort.InferenceSession, binding: ort.IOBinding) -> None:
        import onnxruntime as ort

        options = ort.RunOptions()
        inner = getattr(sess, "_sess", None)
        raw = getattr(binding, "_iobinding", None)
        capture = getattr(inner, "is_webgpu_graph_capture_enabled", None)
        self.direct = raw is not None and callable(capture) and not capture()
        self.run: Callable[[], None]
        self.bind: Callable[[str, object], None]
        if self.direct:  # partials of the binding's C entries: no Python frame per call
            self.run = functools.partial(inner.run_with_iobinding, raw, options)  # type: ignore[union-attr]
            self.bind = raw.bind_ortvalue_input  # type: ignore[union-attr]
        else:
            self.run = functools.partial(sess.run_with_iobinding, binding, options)
            self.bind = binding.bind_ortvalue_input

    def held(self, value: ort.OrtValue) -> object:
        """What :attr:`bind` takes for ``value`` (keep ``value`` alive while it is bound)."""
        return value._ortvalue if self.direct else value
