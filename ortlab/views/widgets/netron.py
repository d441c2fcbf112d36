"""Netron (a declared dependency) as the "open the raw model" view: served on 127.0.0.1 from a
thread in the kernel, embedded in an IFrame. It draws the file, knows nothing of runtime."""

from __future__ import annotations

import atexit
import html
import logging

import ipywidgets

from ortlab.core.model import ModelLike, load

__all__ = ["NetronView", "netron"]

_SERVED: list[tuple[str, int]] = []


class NetronView(ipywidgets.HTML):  # type: ignore[misc,unused-ignore]  # untyped base
    """An IFrame on a local Netron server; ``stop()`` ends the server."""

    def __init__(self, url: str, address: tuple[str, int], height: int) -> None:
        note = (
            "Netron runs on the kernel's machine at "
            f"<code>{html.escape(url)}</code>; if the page stays blank, your browser cannot "
            "reach the kernel's localhost (remote kernel): forward that port, or use "
            "ortlab.graph() which needs no server."
        )
        frame = (
            f'<iframe src="{html.escape(url, quote=True)}" style="width:100%;height:{height}px;'
            'border:1px solid #ddd" sandbox="allow-scripts allow-same-origin allow-downloads">'
            "</iframe>"
        )
        super().__init__(value=f"{frame}<div style='font-size:11px;color:#666'>{note}</div>")
        self.url = url
        self.address = address
        self.add_class("ortlab-netron")

    def stop(self) -> None:
        import netron as _netron

        _netron.stop(self.address)
        if self.address in _SERVED:
            _SERVED.remove(self.address)


def netron(model: ModelLike, height: int = 700) -> NetronView:
    """Serve ``model`` (an ortlab Model, or any path/bytes ortlab.load accepts) with Netron on
    127.0.0.1 and embed it. The file served is the one sessions run (never a modified copy)."""
    import netron as _netron

    m = load(model)
    # netron.serve calls logging.basicConfig() when the root logger has no handler, which
    # would reconfigure the user's logging: give it a handler to find, then take it back.
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        address = _netron.serve(str(m.path), None, address=("127.0.0.1", 0), browse=False)
    finally:
        root.removeHandler(guard)
    host, port = address[0], int(address[1])
    _SERVED.append((host, port))
    return NetronView(f"http://{host}:{port}", (host, port), height)


@atexit.register
def _stop_all() -> None:
    import netron as _netron

    for address in list(_SERVED):
        _netron.stop(address)
