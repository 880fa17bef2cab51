"""The flytekit release line the plugin is built and tested for (standard library only: the entry point reads it)."""

from __future__ import annotations

__all__ = ["SUPPORTED_FLYTEKIT"]

#: The flytekit release line (major, minor) the plugin is built and tested for.
SUPPORTED_FLYTEKIT = (1, 16)
