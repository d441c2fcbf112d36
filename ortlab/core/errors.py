"""The one error hierarchy of ortlab.

Every error a user can cause (a bad file, a wrong feed, an EP that does not load) is an
:class:`OrtlabError`; leaves also subclass the natural builtin so ``except ValueError`` keeps
working. Internal bugs are *not* OrtlabErrors. Messages follow one shape: what failed, what was
requested, what is available, how to fix it.
"""

from __future__ import annotations

__all__ = [
    "CacheError",
    "ExternalDataError",
    "FeedError",
    "InvalidModelError",
    "OptionError",
    "OrtlabError",
    "OrtlabWarning",
    "ProfileParseError",
    "ProviderError",
    "ProviderFallbackError",
    "ProviderFallbackWarning",
    "QuantizationError",
    "RunError",
    "SessionConfigError",
    "SessionCreationError",
    "UnsupportedModelError",
    "VersionInstallError",
    "WorkerCancelledError",
    "WorkerCrashedError",
    "WorkerError",
    "WorkerTimeoutError",
    "error_text",
    "failure_text",
]


class OrtlabError(Exception):
    """Base of every error ortlab raises on purpose."""


class InvalidModelError(OrtlabError, ValueError):
    """The input is not a readable ONNX model (empty, truncated, not protobuf, not a model)."""


class ExternalDataError(InvalidModelError):
    """External data is missing, too short, or points outside the model's folder."""


class UnsupportedModelError(OrtlabError, ValueError):
    """A readable model this onnxruntime cannot run (IR/opset too new, unknown op domain)."""


class FeedError(OrtlabError, ValueError):
    """Input feeds do not match the model (names, dtype, rank, fixed dims)."""


class OptionError(OrtlabError, ValueError):
    """A verb's option has a value it does not know (the message lists the ones it does)."""


class SessionConfigError(OrtlabError, ValueError):
    """A SessionConfig field has a value ORT does not accept."""


class ProviderError(SessionConfigError):
    """An execution provider name is unknown, or not part of this onnxruntime build."""


class ProviderFallbackError(OrtlabError, RuntimeError):
    """A requested execution provider did not load and the config forbids falling back."""


class SessionCreationError(OrtlabError, RuntimeError):
    """ORT refused to create an InferenceSession for this model and config."""


class RunError(OrtlabError, RuntimeError):
    """``session.run`` failed."""


class ProfileParseError(OrtlabError, ValueError):
    """An ORT profile file could not be read."""


class CacheError(OrtlabError, OSError):
    """ortlab's cache directory is unusable."""


class WorkerError(OrtlabError, RuntimeError):
    """The worker process that runs ORT failed."""


class WorkerCrashedError(WorkerError):
    """The worker died (segfault, abort, out of memory); a fresh one serves the next call."""


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A call took longer than its timeout; the worker was stopped. ``timeout_s`` is the limit
    it ran under (None where not known)."""

    def __init__(self, message: str, timeout_s: float | None = None) -> None:
        super().__init__(message)
        self.timeout_s = timeout_s


class WorkerCancelledError(WorkerError):
    """A call was cancelled by the user; the worker was stopped."""


class VersionInstallError(OrtlabError, RuntimeError):
    """An onnxruntime version could not be installed into its own environment (no such
    version for this platform, no network, pip failed)."""


class QuantizationError(OrtlabError, ValueError):
    """A model or calibration set ortlab cannot quantize, with the reason."""


class OrtlabWarning(UserWarning):
    """Base of ortlab's warnings."""


class ProviderFallbackWarning(OrtlabWarning):
    """A requested execution provider did not load; the session runs on the others."""


def error_text(err: BaseException, limit: int = 400) -> str:
    """``Type: first line`` of any exception, safe for empty messages (ORT's quantizer raises
    ``AssertionError()`` with none) and multi-line ones (only the first non-empty line)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    first = lines[0] if lines else "(no message)"
    return f"{type(err).__name__}: {first[:limit]}"


def failure_text(err: BaseException) -> str:
    """ortlab's own message (it names the step and ORT's words), else ``Type: first line`` —
    never an empty string, whatever the exception holds."""
    text = str(err).strip()
    if isinstance(err, OrtlabError) and text:
        return text[:2000]
    return error_text(err, 2000)
