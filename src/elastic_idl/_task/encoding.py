"""Formats out: binary, JSON, YAML, textproto and flytekit's custom dict, from the one TaskView.

Each function converts its input once (`of`) and reads the view's
own message. Pure: task in, data out.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, NamedTuple

import yaml
from google.protobuf import json_format, text_format
from google.protobuf.descriptor import FieldDescriptor

from elastic_idl._errors import EncodeError, SkewError, SkewWarning
from elastic_idl._task.codec import EXTENSION_FIELD_MIN, FORMATS, TEXTPROTO_HEADER, Format, is_repeated
from elastic_idl._task.validate import violations
from elastic_idl._task.view import TaskView, message_of, of

__all__ = ["encode", "extension_fields", "to_custom"]


def _extensions(t: TaskView) -> list[str]:
    e = t.elastic
    if e is None:
        return []
    return [f"elastic_config.{fd.name}" for fd, _ in e.ListFields() if fd.number >= EXTENSION_FIELD_MIN]


def extension_fields(task: Any) -> list[str]:
    """Paths of the elastic-idl extension fields that are set in ``task`` (none for upstream-only tasks).

    ``task``: anything `elastic_idl.view` takes.
    """
    return _extensions(of(task))


def _message_for(t: TaskView, upstream: bool, allow_loss: bool) -> Any:
    """The view's message, or (``upstream``) a copy without the extension fields; SkewError/SkewWarning."""
    pb: Any = message_of(t)
    if not upstream:
        return pb
    lost = _extensions(t)
    if not lost:
        return pb
    if not allow_loss:
        raise SkewError(lost)
    warnings.warn(SkewWarning("dropped for upstream readers: " + ", ".join(lost), fields=tuple(lost)), stacklevel=3)
    out: Any = t.to_message()
    for fd, _ in list(out.elastic_config.ListFields()):
        if fd.number >= EXTENSION_FIELD_MIN:
            out.elastic_config.ClearField(fd.name)
    return out


_STRINGIFIED = frozenset(
    (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    )
)
_PLAIN = frozenset(
    (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_UINT32)
)
_AS_IS, _TO_STR, _ENUM, _DURATION, _MESSAGE, _GENERIC = range(6)


class _Field(NamedTuple):
    """How one field is written in proto3 JSON, worked out once per field descriptor and naming."""

    name: str  # its JSON name (camelCase) or its proto name (snake_case), as the output asks
    kind: int
    repeated: bool
    enum_names: dict[int, str]


#: field descriptor -> its plan; one table for camelCase output, one for snake_case.
_PLANS: tuple[dict[Any, _Field], dict[Any, _Field]] = ({}, {})


def _field(fd: Any, snake_case: bool) -> _Field:
    t, names = fd.type, {}
    if t == FieldDescriptor.TYPE_MESSAGE:
        mt = fd.message_type
        kind = _DURATION if mt.full_name == "google.protobuf.Duration" else _MESSAGE
        if mt.GetOptions().map_entry or (mt.full_name.startswith("google.protobuf.") and kind != _DURATION):
            kind = _GENERIC
    elif t == FieldDescriptor.TYPE_ENUM:
        kind, names = _ENUM, {v.number: v.name for v in fd.enum_type.values}
    elif t in _STRINGIFIED:
        kind = _TO_STR
    else:
        kind = _AS_IS if t in _PLAIN else _GENERIC
    found = _PLANS[snake_case][fd] = _Field(fd.name if snake_case else fd.json_name, kind, is_repeated(fd), names)
    return found


def _json_value(kind: int, names: dict[int, str], value: Any, snake_case: bool) -> Any:
    if kind == _AS_IS:
        return value
    if kind == _ENUM:
        return names.get(value, value)  # an unknown number stays a number
    if kind == _MESSAGE:
        return _json_object(value, snake_case)
    if kind == _DURATION:
        return value.ToJsonString()  # ValueError past the Duration range, as in MessageToDict
    return str(value)


def _json_object(msg: Any, snake_case: bool) -> dict[str, Any]:
    """``json_format.MessageToDict`` for the task messages, over ``ListFields`` (same order, same values).

    The generic converter was a third of a render; a test checks both agree on every contract
    vector, and a field of a type tasks do not use (a map, a float, a well-known type other than
    Duration) makes the message go through json_format itself.
    """
    out: dict[str, Any] = {}
    plans = _PLANS[snake_case]
    for fd, value in msg.ListFields():
        name, kind, repeated, names = plans.get(fd) or _field(fd, snake_case)
        if kind == _GENERIC:
            return dict(json_format.MessageToDict(msg, preserving_proto_field_name=snake_case))
        if repeated:
            out[name] = [_json_value(kind, names, v, snake_case) for v in value]
        elif kind == _AS_IS:  # the common kinds inline: a call per field was a tenth of a render
            out[name] = value
        elif kind == _MESSAGE:
            out[name] = _json_object(value, snake_case)
        else:
            out[name] = _json_value(kind, names, value, snake_case)
    return out


def _to_dict(t: TaskView, pb: Any, *, snake_case: bool = False) -> dict[str, Any]:
    """The message as proto3 JSON, with a typed error for values that have no JSON form (e.g. a Duration past 10,000 years)."""
    try:
        return _json_object(pb, snake_case)
    except (json_format.SerializeToJsonError, ValueError) as exc:
        bad = [v for v in violations(t) if v.rule == "elastic.duration.valid"]
        field = bad[0].field if bad else ""
        raise EncodeError(field, f"no proto3 JSON form ({exc})") from None


def to_custom(task: Any, *, upstream: bool = False, allow_loss: bool = False) -> dict[str, Any]:
    """The ``TaskTemplate.custom`` dict of a task: camelCase JSON, zero values left out (like flytekit).

    Args:
        task: The task: anything `elastic_idl.view` takes (a TaskView, a message of either
            shape and binding, serialized data of the kubeflow shape).
        upstream: Emit only fields upstream flyteidl knows, so its JSON parser
            accepts the dict with unknown fields rejected.
        allow_loss: With ``upstream``, drop set extension fields with a
            `SkewWarning` instead of raising `SkewError`.

    Raises:
        SkewError: ``upstream`` is set and an extension field would be lost.
        EncodeError: A value has no proto3 JSON form (a task that fails elastic.duration.valid).
    """
    t = of(task)
    return _to_dict(t, _message_for(t, upstream, allow_loss))


def encode(
    task: Any,
    format: Format,
    *,
    upstream: bool = False,
    allow_loss: bool = False,
) -> bytes | str:
    """Serialize a task (anything `elastic_idl.view` takes): ``bytes`` for binary, ``str`` for text.

    Binary output is deterministic. JSON is the custom dict (camelCase); YAML uses
    snake_case field names; textproto starts with a ``# proto-message:`` header.
    ``upstream``/``allow_loss`` work as in `to_custom` for every format.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    t = of(task)
    pb = _message_for(t, upstream, allow_loss)
    if format == "binary":
        out: bytes = pb.SerializeToString(deterministic=True)
        return out
    if format == "json":
        return json.dumps(_to_dict(t, pb), indent=2, sort_keys=True) + "\n"
    if format == "yaml":
        return yaml.safe_dump(_to_dict(t, pb, snake_case=True), sort_keys=False, allow_unicode=True)
    body = text_format.MessageToString(pb, as_utf8=True)
    return f"{TEXTPROTO_HEADER}{pb.DESCRIPTOR.full_name}\n# task_type_version: {t.task_type_version}\n{body}"
