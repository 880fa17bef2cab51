"""elastic-idl's flytekit task plugin: ``@task(task_config=elastic_idl.Elastic(...))``.

Installed with the extra ``elastic-idl[flytekit]``. ``Elastic`` is registered with flytekit's
task plugin table (its public ``TaskPlugins.register_pythontask_plugin``) where flytekit
expects plugins to register: by our ``flytekit.plugins`` entry point, which ``import flytekit``
loads, or as ``Elastic``'s module loads when flytekit came first
(`elastic_idl.flytekit._register`), so user code imports nothing but the config:

```python
from flytekit import task
from elastic_idl import Elastic

@task(task_config=Elastic(nnodes=2, nproc_per_node=4))
def train(lr: float) -> float: ...
```

The task serializes what the SDK config says (`elastic_idl.Elastic.to_template`)
and runs, locally and in a pod, through elastic-idl's launcher. See
docs/guide/flytekit.md, "Using it from flytekit".

Public names (loaded on first use, so importing this package loads neither
flytekit nor torch):

- `ElasticFunctionTask`: the task plugin class ``@task`` builds for an
  ``Elastic`` config; importing it registers ``Elastic`` too (the way in where flytekit
  does not see the entry point). A subclass of ``Elastic`` is registered as any plugin's
  config: ``TaskPlugins.register_pythontask_plugin(MySubclass, ElasticFunctionTask)``.
- `render_pytorchjob_from_template`: the ``PyTorchJob`` for a flyteidl
  ``TaskTemplate`` (message or bytes), the backend's actual input.
- `plugin_error`: why the plugin cannot be used in this environment, or None (a
  flytekit outside the tested lines is no such reason: it gets one warning per process).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> private module of this package that defines it
_EXPORTS: dict[str, str] = {
    "ElasticFunctionTask": "_task",
    "render_pytorchjob_from_template": "_template",
    "plugin_error": "_register",
}

__all__ = ["ElasticFunctionTask", "plugin_error", "render_pytorchjob_from_template"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'elastic_idl.flytekit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"elastic_idl.flytekit.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from elastic_idl.flytekit._register import plugin_error
    from elastic_idl.flytekit._task import ElasticFunctionTask
    from elastic_idl.flytekit._template import render_pytorchjob_from_template
