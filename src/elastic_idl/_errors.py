"""The project's exception types. Every error a user can cause is one of these."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DecodeError",
    "ElasticIdlError",
    "RenderError",
    "UnsupportedVersionError",
    "ValidationError",
    "Violation",
]


class ElasticIdlError(Exception):
    """Base class of every error elastic-idl raises on purpose."""


class DecodeError(ElasticIdlError, ValueError):
    """Input could not be decoded into a task message.

    Attributes:
        field: Dotted path of the offending field ("" when the input as a whole is bad).
        reason: What is wrong, in words.
        format: The input format that was being decoded ("binary", "json", ...).
    """

    def __init__(self, field: str, reason: str, *, format: str = "") -> None:
        self.field = field
        self.reason = reason
        self.format = format
        where = f"{field}: " if field else ""
        fmt = f" ({format})" if format else ""
        super().__init__(f"{where}{reason}{fmt}")


class UnsupportedVersionError(ElasticIdlError, ValueError):
    """A task_type_version that neither side knows (only 0 and 1 exist)."""

    def __init__(self, version: object) -> None:
        self.version = version
        super().__init__(
            f"task_type_version: unsupported task template version {version!r} "
            "(0 = legacy DistributedPyTorchTrainingTask, 1 = kubeflow DistributedPyTorchTrainingTask)"
        )


@dataclass(frozen=True, order=True)
class Violation:
    """One broken rule.

    Attributes:
        field: Dotted path of the field in the task message, e.g. "elastic_config.min_replicas".
        rule: Stable rule id, e.g. "elastic.min_le_max" (see ``elastic_idl.RULES``).
        message: Human-readable explanation with the offending values.
    """

    field: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}: {self.message}"


class ValidationError(ElasticIdlError, ValueError):
    """A task broke one or more rules. ``violations`` lists all of them."""

    def __init__(self, violations: Iterable[Violation]) -> None:
        self.violations: tuple[Violation, ...] = tuple(violations)
        lines = "\n".join(f"  {v}" for v in self.violations)
        n = len(self.violations)
        super().__init__(f"{n} violation{'s' if n != 1 else ''}:\n{lines}")


class RenderError(ElasticIdlError, ValueError):
    """A Kubernetes object could not be rendered from the given task and options.

    Attributes:
        field: The option or task field at fault (e.g. "name", "image").
        reason: What is wrong.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")
