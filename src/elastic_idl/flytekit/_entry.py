"""flytekit's entry point into elastic-idl (group ``flytekit.plugins``, pyproject.toml).

flytekit 1.16 imports every module of that group at the end of ``import flytekit``
(``flytekit.load_implicit_plugins``), in every environment that holds both packages, whatever
extras were chosen. This one registers ``elastic_idl.Elastic`` with flytekit's task plugin table
when the SDK is loaded already (`elastic_idl.flytekit._register.register`); when it is
loaded later, the SDK module registers it itself as it loads (see `._register`). So it:

- costs next to nothing: it loads neither the SDK nor torch; the plugin only when ``Elastic``
  is loaded;
- never raises: an error here would break ``import flytekit``.
"""

from __future__ import annotations

import logging
import sys

__all__: list[str] = []

#: The module that defines Elastic (it is never imported from here).
_SDK_MODULE = "elastic_idl._sdk.elastic"

try:
    _sdk = sys.modules.get(_SDK_MODULE)
    _elastic = getattr(_sdk, "Elastic", None)
    if _elastic is not None:
        from elastic_idl.flytekit._register import register

        register(_elastic)
except Exception as exc:  # a broken install of ours must not break `import flytekit`
    logging.getLogger("elastic_idl").warning(
        "elastic-idl: the flytekit plugin cannot be loaded: %s: %s", type(exc).__name__, exc
    )
