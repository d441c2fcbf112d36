"""Plugin execution providers (ORT >= 1.22): EPs shipped as their own pip packages
(``onnxruntime-ep-openvino``, ``onnxruntime-qnn``…) and registered at run time.

Each package exposes ``get_ep_name()``/``get_ep_names()`` and ``get_library_path()``;
``onnxruntime.register_execution_provider_library`` loads it, ``onnxruntime.get_ep_devices()``
then lists its devices, and a session selects them with
``SessionOptions.add_provider_for_devices``. Naming a registered plugin EP in ``providers=[…]``
instead gives a CPU-only session, silently: ortlab always selects plugin EPs by device, and
says so when one lists no device on this machine.

Registration happens in the worker (the only place ORT runs a model), once per process. The
packages stay the user's install (QNN's carries Qualcomm's licence): ortlab imports them when
present and never copies their files. Install them with ``--no-deps``: their dependency on
``onnxruntime`` would replace onnxruntime-gpu in the environment.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from typing import TYPE_CHECKING

from ortlab.core.eps import plugin_modules
from ortlab.core.errors import error_text
from ortlab.core.runtime import PluginEP

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["PluginEP", "device_type", "plugin_devices", "plugin_modules", "registered"]


def device_type(ep_device: ort.OrtEpDevice) -> str:
    """An ``OrtEpDevice``'s hardware type: ``OrtHardwareDeviceType.NPU`` → ``'NPU'``."""
    return str(ep_device.device.type).rsplit(".", 1)[-1]


def _version(module: str) -> str:
    for dist in (module.replace("_", "-"), module):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "?"


@functools.cache
def registered() -> tuple[PluginEP, ...]:
    """Register every installed plugin EP with ORT (once per process) and say what each
    offers here. A package that fails to register is listed with the reason."""
    import onnxruntime as ort

    if not hasattr(ort, "register_execution_provider_library"):  # ORT < 1.22
        return ()
    out = []
    for module in plugin_modules():
        try:
            pkg = importlib.import_module(module)
            names = (
                list(pkg.get_ep_names()) if hasattr(pkg, "get_ep_names") else [pkg.get_ep_name()]
            )
            library = str(pkg.get_library_path())
        except Exception as err:  # noqa: BLE001 - a broken package is reported, not fatal
            out.append(PluginEP(module, module, _version(module), "", error_text(err)))
            continue
        for name in names:
            try:
                ort.register_execution_provider_library(name, library)
                error = ""
            except Exception as err:  # noqa: BLE001 - e.g. built for another ORT version
                error = error_text(err)
            kinds = sorted({device_type(d) for d in ort.get_ep_devices() if d.ep_name == name})
            out.append(PluginEP(name, module, _version(module), library, error, kinds))
    return tuple(out)


def plugin_devices(ep: str, device: str | None = None) -> list[ort.OrtEpDevice]:
    """The ``OrtEpDevice`` objects of a registered EP (of one device type if given)."""
    import onnxruntime as ort

    registered()
    return [
        d
        for d in ort.get_ep_devices()
        if d.ep_name == ep and (device is None or device_type(d) == device.upper())
    ]
