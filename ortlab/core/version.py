"""ortlab's version, in a module of its own: results stamp it into their JSON without importing
the top-level package (which imports every layer)."""

__version__ = "0.1.0"
