"""The shared-memory pod template of ``Elastic(increase_shared_mem=True)`` (the default).

PyTorch's data loader workers pass batches through ``/dev/shm``, which a
container gets only 64 MiB of by default. Like flytekitplugins-kfpytorch, the
task's pod template gets a memory-backed ``emptyDir`` volume named ``shm``
mounted at ``/dev/shm`` in the primary container, so the serialized
``TaskTemplate`` is the same as kfpytorch's. Unlike kfpytorch: the user's
``PodTemplate`` is copied, never changed; a primary container that already
mounts ``/dev/shm`` is left as it is (no second volume); the mount goes into
the container named ``primary_container_name``, whatever its position; and no
deprecation warning is issued.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["SHM_MOUNT_PATH", "SHM_VOLUME", "with_shared_memory"]

SHM_MOUNT_PATH = "/dev/shm"
#: Volume name, as kfpytorch writes it (another name is picked if the user's template uses it).
SHM_VOLUME = "shm"


def _free_volume_name(volumes: list[Any]) -> str:
    taken = {v.name for v in volumes}
    name, n = SHM_VOLUME, 1
    while name in taken:
        name, n = f"{SHM_VOLUME}-{n}", n + 1
    return name


def with_shared_memory(pod_template: Any | None) -> Any:
    """A copy of ``pod_template`` (a flytekit ``PodTemplate``, or None) with ``/dev/shm`` memory-backed.

    Raises:
        ImportError: The ``kubernetes`` package is missing (part of ``elastic-idl[flytekit]``).
    """
    from flytekit.core.pod_template import PodTemplate
    from kubernetes.client import V1Container, V1EmptyDirVolumeSource, V1PodSpec, V1Volume, V1VolumeMount

    template = copy.deepcopy(pod_template) if pod_template is not None else PodTemplate()
    if template.pod_spec is None:
        template.pod_spec = V1PodSpec(containers=[])
    spec = template.pod_spec
    if spec.containers is None:
        spec.containers = []
    primary = next((c for c in spec.containers if c.name == template.primary_container_name), None)
    if primary is None:
        primary = V1Container(name=template.primary_container_name)
        spec.containers.append(primary)
    if primary.volume_mounts is None:
        primary.volume_mounts = []
    if any(m.mount_path == SHM_MOUNT_PATH for m in primary.volume_mounts):
        return template  # the user's own /dev/shm: keep it, add nothing
    if spec.volumes is None:
        spec.volumes = []
    name = _free_volume_name(spec.volumes)
    spec.volumes.append(V1Volume(name=name, empty_dir=V1EmptyDirVolumeSource(medium="Memory")))
    primary.volume_mounts.append(V1VolumeMount(name=name, mount_path=SHM_MOUNT_PATH))
    return template
