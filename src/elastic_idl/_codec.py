"""Formats in and out: binary, JSON, textproto, YAML and flytekit's custom dict.

One place for format detection and decode errors. Every failure is a
:class:`~elastic_idl.DecodeError` that names the field; no protobuf or YAML
exception escapes. Pure: data in, data out.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import yaml
from google.protobuf import json_format, text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError as _PbDecodeError
from google.protobuf.message import Message

from elastic_idl._errors import DecodeError, ElasticIdlError
from elastic_idl._messages import TASK_CLASSES, Task, as_pb2, task_class, task_type_version_of

__all__ = [
    "EXTENSION_FIELD_MIN",
    "FORMATS",
    "EncodeError",
    "SkewError",
    "SkewWarning",
    "decode",
    "detect_format",
    "encode",
    "extension_fields",
    "from_custom",
    "to_custom",
]

Format = Literal["binary", "json", "textproto", "yaml"]
#: Input/output formats of a task (``custom`` is the dict form: see to_custom/from_custom).
FORMATS: tuple[Format, ...] = ("binary", "json", "textproto", "yaml")
#: ElasticConfig fields numbered from here on are elastic-idl extensions upstream does not know.
EXTENSION_FIELD_MIN = 100
#: First line of a textproto file: names the message the file holds.
TEXTPROTO_HEADER = "# proto-message: "

_INT32 = (-(2**31), 2**31 - 1)
_INT_TYPES = {
    FieldDescriptor.TYPE_INT32: _INT32,
    FieldDescriptor.TYPE_SINT32: _INT32,
    FieldDescriptor.TYPE_SFIXED32: _INT32,
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_DURATION_RE = re.compile(r"^-?\d+(\.\d{1,9})?s$")


class SkewError(ElasticIdlError, ValueError):
    """Emitting for an upstream-only reader would drop extension fields that are set.

    Attributes:
        fields: Paths of the extension fields that upstream would lose.
    """

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = tuple(fields)
        super().__init__(
            "upstream readers do not know these fields and would lose them: "
            + ", ".join(self.fields)
            + " (clear them, or pass allow_loss=True to drop them with a warning)"
        )


class EncodeError(ElasticIdlError, ValueError):
    """A message holds a value its JSON/YAML form cannot express (e.g. an invalid Duration).

    Attributes:
        field: Dotted path of the offending field ("" when unknown).
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        super().__init__(f"{field}: {reason}" if field else reason)


class SkewWarning(UserWarning):
    """Extension fields were dropped to emit the upstream-only form (allow_loss=True)."""


# --------------------------------------------------------------------------- decode


def detect_format(data: bytes | str) -> Format:
    """Guess the format of a serialized task: json, textproto, yaml or binary."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return "binary"
        if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
            return "binary"
    else:
        text = data
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return "json"
    if stripped.startswith(TEXTPROTO_HEADER.strip()) or not stripped:
        return "textproto"
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return "textproto"
    # Flat textproto ("a: 1") is also YAML and decodes the same; "a { b: 1 }" is
    # YAML too, but with a key that is no field name.
    if isinstance(loaded, dict) and all(isinstance(k, str) and k.isidentifier() for k in loaded):
        return "yaml"
    return "textproto"


_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_WIRE_TYPES = {
    FieldDescriptor.TYPE_DOUBLE: _I64,
    FieldDescriptor.TYPE_FIXED64: _I64,
    FieldDescriptor.TYPE_SFIXED64: _I64,
    FieldDescriptor.TYPE_FLOAT: _I32,
    FieldDescriptor.TYPE_FIXED32: _I32,
    FieldDescriptor.TYPE_SFIXED32: _I32,
    FieldDescriptor.TYPE_STRING: _LEN,
    FieldDescriptor.TYPE_BYTES: _LEN,
    FieldDescriptor.TYPE_MESSAGE: _LEN,
}


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = raw[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def _check_wire_types(raw: bytes, desc: Descriptor, path: str, version: int) -> None:
    """Refuse a known field number written with another wire type.

    protobuf keeps such a field as an unknown field, so bytes of the other task
    shape (legacy ``workers = 1`` is a number, kubeflow field 1 a message) would
    decode into a task that silently lacks them. Unknown field numbers stay
    allowed: a newer schema may send them. Runs after a successful parse, so the
    bytes are well-formed.
    """
    by_number = {f.number: f for f in desc.fields}
    i = 0
    while i < len(raw):
        key, i = _varint(raw, i)
        number, wire = key >> 3, key & 7
        start = i
        if wire == _VARINT:
            _, i = _varint(raw, i)
        elif wire == _I64:
            i += 8
        elif wire == _I32:
            i += 4
        elif wire == _LEN:
            size, start = _varint(raw, i)
            i = start + size
        else:  # groups (3, 4): never written by proto3
            return
        f = by_number.get(number)
        if f is None:
            continue
        fpath = f"{path}.{f.name}" if path else f.name
        expected = _WIRE_TYPES.get(f.type, _VARINT)
        packed = wire == _LEN and _is_repeated(f) and expected != _LEN
        if wire != expected and not packed:
            raise DecodeError(
                fpath,
                f"field {number} has wire type {wire} but {desc.name}.{f.name} needs {expected}: "
                f"is this the other task shape (task_type_version {version} was requested)?",
                format="binary",
            )
        if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type is not None and wire == _LEN:
            if f.message_type.full_name.startswith("elastic_idl."):
                _check_wire_types(raw[start:i], f.message_type, fpath, version)


def _class_for(task_type_version: int, header_name: str | None) -> type[Message]:
    cls = task_class(task_type_version)
    if header_name is not None and header_name != cls.DESCRIPTOR.full_name:
        by_name = {c.DESCRIPTOR.full_name: v for v, c in TASK_CLASSES.items()}
        if header_name not in by_name:
            raise DecodeError(
                "", f"header names {header_name!r}, which is not a task message of this schema", format="textproto"
            )
        raise DecodeError(
            "",
            f"header names {header_name} (task_type_version {by_name[header_name]}) "
            f"but task_type_version {task_type_version} was requested",
            format="textproto",
        )
    return cls


def decode(
    data: bytes | str,
    *,
    format: Format | None = None,
    task_type_version: int = 1,
) -> Task:
    """Decode a serialized task of the shape ``task_type_version`` names.

    Args:
        data: The serialized task. ``str`` for the text formats, ``bytes`` for any.
        format: One of :data:`FORMATS`; None detects it (:func:`detect_format`).
        task_type_version: 0 for the legacy shape, 1 (default) for the kubeflow shape.

    Raises:
        DecodeError: The data is not a valid encoding of that message; names the field.
        UnsupportedVersionError: task_type_version is not 0 or 1.
    """
    fmt = format or detect_format(data)
    if fmt not in FORMATS:
        raise DecodeError("", f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "binary":
        cls = task_class(task_type_version)
        raw = data.encode("utf-8") if isinstance(data, str) else data
        msg = cls()
        try:
            msg.ParseFromString(raw)
        except (_PbDecodeError, RuntimeError, ValueError) as exc:
            raise DecodeError(
                "", f"not a valid {cls.DESCRIPTOR.name} (truncated or garbled binary: {exc})", format="binary"
            ) from None
        _check_wire_types(raw, cls.DESCRIPTOR, "", task_type_version)
        return msg
    text = data.decode("utf-8", errors="strict") if isinstance(data, bytes) else data
    if fmt == "textproto":
        return _decode_textproto(text, task_type_version)
    if fmt == "json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DecodeError("", f"malformed JSON: {exc}", format="json") from None
    else:
        try:
            obj = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise DecodeError("", f"malformed YAML: {exc}", format="yaml") from None
    return _from_mapping(obj, task_type_version, fmt)


def from_custom(custom: Mapping[str, Any], *, task_type_version: int = 1) -> Task:
    """Build the task from a ``TaskTemplate.custom`` dict, as flytekit (or :func:`to_custom`) emits it.

    Accepts camelCase and snake_case keys, and integral floats for integers
    (a protobuf Struct stores every number as a double).

    Raises:
        DecodeError: A key is unknown or a value has the wrong type; names the field.
    """
    return _from_mapping(custom, task_type_version, "custom")


def _from_mapping(obj: Any, task_type_version: int, fmt: str) -> Task:
    cls = task_class(task_type_version)
    if obj is None:
        obj = {}
    if not isinstance(obj, Mapping):
        raise DecodeError("", f"expected an object at the top level, got {type(obj).__name__}", format=fmt)
    normalised = _check_mapping(obj, cls.DESCRIPTOR, "", fmt)
    msg = cls()
    try:
        json_format.ParseDict(normalised, msg, ignore_unknown_fields=False)
    except (json_format.ParseError, TypeError, ValueError, AttributeError) as exc:
        raise DecodeError(_guess_field(str(exc)), str(exc), format=fmt) from None
    return msg


def _guess_field(text: str) -> str:
    # protobuf's messages say "Failed to parse <name> field: ..." per nesting level.
    names = re.findall(r"Failed to parse (\w+) field", text)
    if not names:
        m = re.search(r'no field named "([^"]+)"', text)
        names = [m.group(1)] if m else []
    return ".".join(names)


def _field_by_key(desc: Descriptor, key: str) -> FieldDescriptor | None:
    for f in desc.fields:
        if key in (f.name, f.json_name):
            return f
    return None


def _is_repeated(f: FieldDescriptor) -> bool:
    # protobuf >= 5.28 has is_repeated; protobuf 7 removed `label`.
    flag = getattr(f, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(getattr(f, "label", None) == FieldDescriptor.LABEL_REPEATED)  # pragma: no cover - protobuf < 5.28


def _check_mapping(obj: Mapping[Any, Any], desc: Descriptor, path: str, fmt: str) -> dict[str, Any]:
    """Walk a dict against a message descriptor, so errors name the exact field.

    Returns a copy in which integral doubles of integer and enum fields are ints
    (a protobuf Struct stores every number as a double).
    """
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise DecodeError(path, f"object keys must be strings, got {key!r}", format=fmt)
        f = _field_by_key(desc, key)
        if f is None:
            fpath = f"{path}.{key}" if path else key
            known = ", ".join(sorted(x.json_name for x in desc.fields))
            raise DecodeError(fpath, f"unknown field of {desc.name} (known: {known})", format=fmt)
        fpath = f"{path}.{f.name}" if path else f.name
        if value is None:
            out[key] = None  # JSON null means "unset" in proto3 JSON
        elif _is_repeated(f):
            if not isinstance(value, list):
                raise DecodeError(fpath, f"expected a list, got {type(value).__name__}", format=fmt)
            out[key] = [_check_value(f, item, f"{fpath}[{i}]", fmt) for i, item in enumerate(value)]
        else:
            out[key] = _check_value(f, value, fpath, fmt)
    return out


def _integer(value: Any, path: str, fmt: str, lo: int, hi: int) -> int:
    number: Any = value
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            raise DecodeError(path, f"expected an integer, got {value!r}", format=fmt) from None
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int):
        raise DecodeError(path, f"expected an integer, got {value!r}", format=fmt)
    if not lo <= number <= hi:
        raise DecodeError(path, f"{number} is out of range {lo}..{hi}", format=fmt)
    return number


def _check_value(f: FieldDescriptor, value: Any, path: str, fmt: str) -> Any:
    t = f.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        mt = f.message_type
        if mt is None:  # pragma: no cover - every message field has a type
            return value
        full = mt.full_name
        if full == "google.protobuf.Duration":
            if not (isinstance(value, str) and _DURATION_RE.match(value)):
                raise DecodeError(path, f'expected a duration such as "30s" or "1.5s", got {value!r}', format=fmt)
            return value
        if full == "google.protobuf.Timestamp":
            if not isinstance(value, str):
                raise DecodeError(path, f"expected an RFC 3339 timestamp string, got {value!r}", format=fmt)
            return value
        if not isinstance(value, Mapping):
            raise DecodeError(path, f"expected an object ({mt.name}), got {type(value).__name__}", format=fmt)
        return _check_mapping(value, mt, path, fmt)
    if t == FieldDescriptor.TYPE_ENUM:
        et = f.enum_type
        if et is None:  # pragma: no cover - every enum field has a type
            return value
        names = [v.name for v in et.values]
        if isinstance(value, str):
            if value not in names:
                raise DecodeError(path, f"unknown {et.name} {value!r}; expected one of {', '.join(names)}", format=fmt)
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # A number: kept even when the schema does not define it (proto3 enums are open);
            # validation reports it as enum.known.
            return _integer(value, path, fmt, *_INT32)
        raise DecodeError(path, f"expected one of {', '.join(names)}, got {value!r}", format=fmt)
    if t in _INT_TYPES:
        return _integer(value, path, fmt, *_INT_TYPES[t])
    if t == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise DecodeError(path, f"expected true or false, got {value!r}", format=fmt)
    elif t == FieldDescriptor.TYPE_STRING and not isinstance(value, str):
        raise DecodeError(path, f"expected a string, got {type(value).__name__} {value!r}", format=fmt)
    return value


def _decode_textproto(text: str, task_type_version: int) -> Task:
    header: str | None = None
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if first.startswith(TEXTPROTO_HEADER.strip()):
        header = first.split(":", 1)[1].strip()
    cls = _class_for(task_type_version, header)
    msg = cls()
    try:
        text_format.Parse(text, msg)
    except (text_format.ParseError, ValueError) as exc:
        raise DecodeError(_textproto_field(text, str(exc)), f"bad textproto: {exc}", format="textproto") from None
    return msg  # type: ignore[return-value]


def _textproto_field(text: str, error: str) -> str:
    """The field an error points at: named in the message, or the last `name:` before line:col."""
    m = re.search(r'field named "?([\w.]+)"?', error)
    if m:
        return m.group(1)
    m = re.match(r"(\d+):(\d+)", error)
    if not m:
        return ""
    lines = text.splitlines()
    line, col = int(m.group(1)), int(m.group(2))
    if not 1 <= line <= len(lines):
        return ""
    names = re.findall(r"(\w+)\s*[:{]", lines[line - 1][:col])
    return names[-1] if names else ""


# --------------------------------------------------------------------------- encode


def extension_fields(task: Any) -> list[str]:
    """Paths of the elastic-idl extension fields that are set in ``task`` (none for upstream-only tasks)."""
    pb = as_pb2(task)
    field = "elastic_config"
    if not pb.HasField(field):
        return []
    return [f"{field}.{fd.name}" for fd, _ in pb.elastic_config.ListFields() if fd.number >= EXTENSION_FIELD_MIN]


def _for_upstream(task: Any, allow_loss: bool) -> Any:
    pb = as_pb2(task)
    lost = extension_fields(pb)
    if not lost:
        return pb
    if not allow_loss:
        raise SkewError(lost)
    warnings.warn("dropped for upstream readers: " + ", ".join(lost), SkewWarning, stacklevel=3)
    out = type(pb)()
    out.CopyFrom(pb)
    for fd, _ in list(out.elastic_config.ListFields()):
        if fd.number >= EXTENSION_FIELD_MIN:
            out.elastic_config.ClearField(fd.name)
    return out


def _to_dict(pb: Any, *, snake_case: bool = False) -> dict[str, Any]:
    """MessageToDict, with a typed error for values that have no JSON form (e.g. a Duration past 10,000 years)."""
    try:
        out: dict[str, Any] = json_format.MessageToDict(pb, preserving_proto_field_name=snake_case)
    except (json_format.SerializeToJsonError, ValueError) as exc:
        from elastic_idl._validate import violations

        bad = [v for v in violations(pb) if v.rule == "elastic.duration.valid"]
        field = bad[0].field if bad else ""
        raise EncodeError(field, f"no proto3 JSON form ({exc})") from None
    return out


def to_custom(task: Any, *, upstream: bool = False, allow_loss: bool = False) -> dict[str, Any]:
    """The ``TaskTemplate.custom`` dict of a task: camelCase JSON, zero values left out (like flytekit).

    Args:
        task: The task, either shape, either binding.
        upstream: Emit only fields upstream flyteidl knows, so its JSON parser
            accepts the dict with unknown fields rejected.
        allow_loss: With ``upstream``, drop set extension fields with a
            :class:`SkewWarning` instead of raising :class:`SkewError`.

    Raises:
        SkewError: ``upstream`` is set and an extension field would be lost.
        EncodeError: A value has no proto3 JSON form (a task that fails elastic.duration.valid).
    """
    pb = _for_upstream(task, allow_loss) if upstream else as_pb2(task)
    return _to_dict(pb)


def encode(
    task: Any,
    format: Format,
    *,
    upstream: bool = False,
    allow_loss: bool = False,
) -> bytes | str:
    """Serialize a task: ``bytes`` for binary, ``str`` for the text formats.

    Binary output is deterministic. JSON is the custom dict (camelCase); YAML uses
    snake_case field names; textproto starts with a ``# proto-message:`` header.
    ``upstream``/``allow_loss`` work as in :func:`to_custom` for every format.
    """
    pb = _for_upstream(task, allow_loss) if upstream else as_pb2(task)
    if format == "binary":
        out: bytes = pb.SerializeToString(deterministic=True)
        return out
    if format == "json":
        return json.dumps(_to_dict(pb), indent=2, sort_keys=True) + "\n"
    if format == "yaml":
        data = _to_dict(pb, snake_case=True)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    if format == "textproto":
        body = text_format.MessageToString(pb, as_utf8=True)
        return f"{TEXTPROTO_HEADER}{pb.DESCRIPTOR.full_name}\n# task_type_version: {task_type_version_of(pb)}\n{body}"
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
