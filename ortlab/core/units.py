"""Human units for the numbers ortlab prints (used by messages in every layer)."""

from __future__ import annotations

__all__ = ["fmt_bytes"]


def fmt_bytes(n: float) -> str:
    """``1536`` → ``'1.5 KB'`` (binary multiples, one decimal above bytes)."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"
