"""flytekit's entry point into elastic-idl (group ``flytekit.plugins``, pyproject.toml).

flytekit imports every module of that group at the end of ``import flytekit``
(``load_implicit_plugins``), in every environment that holds both packages, whatever
extras were chosen. This one registers the ``Elastic`` config types that were loaded
before flytekit (`register_waiting`); the other
import order needs no entry point (see `._register`). So it:

- costs next to nothing: the standard library (already loaded by flytekit) and two small
  modules of ours; no torch, no runtime; the plugin itself only when ``Elastic`` is loaded;
- never raises: an error here would break ``import flytekit``.
"""

from __future__ import annotations

import logging

__all__: list[str] = []

try:
    from elastic_idl.flytekit._register import register_waiting
except Exception as exc:  # a broken install of ours must not break `import flytekit`
    logging.getLogger("elastic_idl").warning(
        "elastic-idl: the flytekit plugin cannot be loaded: %s: %s", type(exc).__name__, exc
    )
else:
    register_waiting()
