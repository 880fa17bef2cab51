"""elastic-idl for the ``flyte`` SDK (Flyte 2): ``TaskEnvironment(plugin_config=elastic_idl.flyte2.Elastic(...))``.

```python
import flyte
from elastic_idl.flyte2 import Elastic

env = flyte.TaskEnvironment(name="train", plugin_config=Elastic(nnodes=2, nproc_per_node=4))

@env.task
def train(lr: float) -> float: ...
```

`Elastic` takes flyteplugins-pytorch's arguments with its defaults (change the import line and
nothing else) and is validated by `elastic_idl.Elastic`'s rules. Loading it imports ``flyte``
(when installed) and registers it, and `elastic_idl.Elastic`, with Flyte 2's public
``flyte.extend.TaskPluginRegistry``; importing this package alone imports neither flyte nor
torch, and registers only when ``flyte`` is imported already. See docs/quickstart/flyte2.md.

Public names (loaded on first use):

- `Elastic`, `RunPolicy`: the config and its run policy, shaped as flyteplugins-pytorch's.
- `ElasticFunctionTask`: the task class ``@env.task`` builds for either config type.
- `NotBuiltError`: what a task raises in hybrid mode outside a pod (not built: untested without a backend).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Elastic": "elastic_idl.flyte2._config",
    "RunPolicy": "elastic_idl.flyte2._config",
    "ElasticFunctionTask": "elastic_idl.flyte2._task",
    "NotBuiltError": "elastic_idl._errors",
}

__all__ = ["Elastic", "ElasticFunctionTask", "NotBuiltError", "RunPolicy"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'elastic_idl.flyte2' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from elastic_idl._errors import NotBuiltError
    from elastic_idl.flyte2._config import Elastic, RunPolicy
    from elastic_idl.flyte2._task import ElasticFunctionTask

# With flyte imported already, importing this package registers the config types (Flyte 2 has no
# entry points for task plugins); otherwise loading `Elastic` does, and imports flyte to do it.
if sys.modules.get("flyte") is not None:
    __getattr__("Elastic")
