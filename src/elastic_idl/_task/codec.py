"""Formats in and out: binary, JSON, textproto, YAML and flytekit's custom dict.

One place for format detection and decode errors. Every failure is a
`DecodeError` that names the field; no protobuf or YAML
exception escapes. Pure: data in, data out, but for the two bounded readers
(`read_task_bytes`, `read_task_file`) that the CLI and the pod entrypoint share.
"""

from __future__ import annotations

import codecs
import errno
import json
import math
import os
import re
import select
import stat
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO, Literal, NamedTuple

import yaml
from google.protobuf import json_format, text_format
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import DecodeError as _PbDecodeError
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet as _UnknownFieldSet

from elastic_idl._errors import DecodeError, SkewWarning, brief, did_you_mean
from elastic_idl._task.enums import ENUM_SHORT_NAMES, enum_suggestion, enum_value_name
from elastic_idl._task.messages import TASK_CLASSES, Task, schema_messages, task_class
from elastic_idl._task.names import INT32, STANDALONE_TASK_TYPE, TASK_TYPE, TASK_TYPE_VERSION

__all__ = [
    "EXTENSION_FIELD_MIN",
    "FORMATS",
    "FORMAT_BY_EXTENSION",
    "MAX_INT_DIGITS",
    "MAX_NESTING",
    "MAX_PIPE_WAIT_S",
    "MAX_TASK_BYTES",
    "MAX_YAML_ALIAS_NODES",
    "CustomTemplate",
    "decode",
    "detect_format",
    "format_of_path",
    "from_custom",
    "is_repeated",
    "load_document",
    "load_yaml",
    "lone_surrogate",
    "read_task_bytes",
    "read_task_file",
]

Format = Literal["binary", "json", "textproto", "yaml"]
#: Input/output formats of a task (``custom`` is the dict form: see to_custom/from_custom).
FORMATS: tuple[Format, ...] = ("binary", "json", "textproto", "yaml")
#: ElasticConfig fields numbered from here on are elastic-idl extensions upstream does not know.
EXTENSION_FIELD_MIN = 100
#: First line of a textproto file: names the message the file holds.
TEXTPROTO_HEADER = "# proto-message: "

_INT_TYPES = {
    FieldDescriptor.TYPE_INT32: INT32,
    FieldDescriptor.TYPE_SINT32: INT32,
    FieldDescriptor.TYPE_SFIXED32: INT32,
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_DURATION_RE = re.compile(r"^-?\d+(\.\d{1,9})?s$")


# --------------------------------------------------------------------------- limits and hints

#: The largest task input, in bytes, whatever its source or format: files and stdin of
#: the CLI, the pod's --task-file, --task-template and $ELASTIC_IDL_TASK, and decode().
#: A task is a few hundred bytes; readers stop after this many (a device never ends).
MAX_TASK_BYTES = 1024 * 1024
#: How long a task is waited for when it comes through a pipe (a named pipe, process
#: substitution, stdin from another command), in seconds for the whole read: a writer that
#: never comes (a FIFO nobody opens) or never finishes ends the read with an error, not a hang.
MAX_PIPE_WAIT_S = 30.0
#: How many nodes the aliases of a YAML input may add in total: each use of an alias adds
#: the size of what it names (an alias of a 3-item list adds 4). More is refused, so a few
#: hundred bytes of anchors cannot expand into gigabytes.
MAX_YAML_ALIAS_NODES = 1000
#: The deepest nesting of lists and objects a JSON or YAML input may have (a task needs 6).
MAX_NESTING = 100
#: The most digits an integer in a JSON or YAML input may have: Python's default limit of
#: int <-> str conversion (``json.loads`` refuses longer integers; YAML is held to the same).
MAX_INT_DIGITS = 4300

#: File extension -> format: the CLI and the pod read a file in the format its name says.
FORMAT_BY_EXTENSION: dict[str, Format] = {
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".textproto": "textproto",
    ".txtpb": "textproto",
    ".pbtxt": "textproto",
    ".pb": "binary",
    ".binpb": "binary",
    ".bin": "binary",
}


def format_of_path(path: str) -> Format | None:
    """The format a file name's extension says (`FORMAT_BY_EXTENSION`), or None."""
    dot = path.rfind(".")
    if dot <= max(path.rfind("/"), path.rfind("\\")):
        return None
    return FORMAT_BY_EXTENSION.get(path[dot:].lower())


def _too_large(limit: int = MAX_TASK_BYTES) -> DecodeError:
    what = ", the largest task elastic-idl reads" if limit == MAX_TASK_BYTES else ""
    return DecodeError("", f"the input is larger than {limit:,} bytes{what}")


def read_task_bytes(stream: BinaryIO, limit: int = MAX_TASK_BYTES) -> bytes:
    """Read a task from an open binary stream: at most ``limit`` bytes (`MAX_TASK_BYTES`), else DecodeError.

    Stops reading one byte past the limit, so an endless source (``/dev/zero``, a
    pipe that keeps writing) cannot fill the memory.
    """
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise _too_large(limit)
    return b"".join(chunks)


#: What ``read_task_file`` calls the standard input ("-").
STDIN_NAME = "stdin"


def read_task_file(path: str) -> bytes:
    """Read a task from a path ("-" is stdin): at most `MAX_TASK_BYTES`, and from a pipe
    within `MAX_PIPE_WAIT_S`.

    A named pipe is opened without waiting for its writer, so a FIFO nobody writes to ends
    in an error too. Regular files and devices are read as they are (``/dev/zero`` stops at
    the size limit; a terminal on stdin is waited for, as ``cat`` waits).

    Raises:
        DecodeError: The input is larger than `MAX_TASK_BYTES`.
        OSError: It cannot be read (its ``filename`` is the path, "stdin" for "-"): missing,
            a directory, stdin closed, or a pipe whose writer did not finish in time (TimeoutError).
    """
    if path == "-":
        return _read_fd(0, STDIN_NAME)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: do not wait for a writer here
    try:
        return _read_fd(fd, path)
    finally:
        os.close(fd)


def _read_fd(fd: int, name: str) -> bytes:
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        if exc.errno == errno.EBADF and name == STDIN_NAME:
            raise OSError(exc.errno, "closed: there is no standard input to read ('-' reads stdin)", name) from None
        raise OSError(exc.errno, exc.strerror, name) from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a task file", name)
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return _read_pipe(fd, name)
    if name != STDIN_NAME:
        os.set_blocking(fd, True)
    try:
        with os.fdopen(fd, "rb", buffering=0, closefd=False) as fh:
            return read_task_bytes(fh)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, name) from None


def _read_pipe(fd: int, name: str) -> bytes:
    """A pipe's content up to its end: read only when poll says it is ready, within MAX_PIPE_WAIT_S."""
    deadline = time.monotonic() + MAX_PIPE_WAIT_S
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            what = "nothing was written" if not chunks else f"the writer sent {size:,} bytes but no end"
            reason = f"{what} within {MAX_PIPE_WAIT_S:g} s (a pipe is read for at most that long)"
            raise TimeoutError(errno.ETIMEDOUT, reason, name)
        # Linux reports a FIFO's end (POLLHUP) only once a writer came and went: none came, no event.
        if not poller.poll(math.ceil(left * 1000)):
            continue
        try:
            chunk = os.read(fd, MAX_TASK_BYTES + 1 - size)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, name) from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_TASK_BYTES:
            raise _too_large()


# --------------------------------------------------------------------------- decode: text


def _line_col(text: str | bytes, index: int) -> tuple[int, int]:
    """1-based line and column of a 0-based index (columns count characters, or bytes in bytes)."""
    if isinstance(text, bytes):
        return text.count(b"\n", 0, index) + 1, index - text.rfind(b"\n", 0, index)
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _bom_encoding(data: bytes) -> str | None:
    """ "UTF-16" or "UTF-32" when the bytes start with that encoding's byte order mark, else None."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    return None


def _other_encoding(data: bytes) -> str | None:
    """ "UTF-16" or "UTF-32" when the bytes are text in that encoding (by its BOM, or NULs), else None."""
    by_bom = _bom_encoding(data)
    if by_bom is not None:
        return by_bom
    sample = data[:512]
    half = len(sample) // 2
    # ASCII text in UTF-16 without a BOM: every other byte is NUL.
    if half >= 2 and (sample[1::2].count(0) == half or sample[0::2].count(0) == half):
        other = sample[0::2] if sample[1::2].count(0) == half else sample[1::2]
        if _looks_like_text(other):
            return "UTF-16"
    return None


def _looks_like_text(data: bytes) -> bool:
    """Mostly printable ASCII and no NUL: text with a few bad bytes rather than binary."""
    sample = data[:4096]
    if not sample or 0 in sample:
        return False
    printable = sum(1 for b in sample if 32 <= b < 127 or b in (9, 10, 13))
    return printable >= 0.9 * len(sample)


def _not_utf8_text(encoding: str, fmt: str) -> DecodeError:
    return DecodeError("", f"the input is {encoding} text; a task in a text format must be UTF-8", format=fmt)


def _utf8_error(data: bytes, exc: UnicodeDecodeError, fmt: str) -> DecodeError:
    line, column = _line_col(data, exc.start)
    return DecodeError(
        "",
        f"not valid UTF-8: byte 0x{data[exc.start]:02x} ({exc.reason}); a task in a text format is UTF-8",
        format=fmt,
        line=line,
        column=column,
        offset=exc.start,
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (a str that is no Unicode text: UTF-8 cannot
    encode it, e.g. an undecodable byte of an env var or a JSON ``"\\ud800"``), or None."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def _as_text(data: bytes | str, fmt: str) -> str:
    """The text of a text-format input: UTF-8, a leading BOM dropped; DecodeError otherwise."""
    if isinstance(data, str):
        at = lone_surrogate(data)
        if at is not None:
            line, column = _line_col(data, at)
            raise DecodeError("", "not valid UTF-8 (a lone surrogate)", format=fmt, line=line, column=column)
        return data.removeprefix("\ufeff")
    other = _other_encoding(data)
    if other is not None:
        raise _not_utf8_text(other, fmt)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _utf8_error(data, exc, fmt) from None
    return text.removeprefix("\ufeff")


_JSON_SPECIAL = re.compile(r'[\[\]{}"\\]')


def _json_too_deep(text: str) -> int | None:
    """Index of the first bracket nested deeper than MAX_NESTING, or None. Linear, no recursion."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return None
    depth, in_string, skip = 0, False, -1
    for m in _JSON_SPECIAL.finditer(text):
        i, c = m.start(), m.group()
        if i == skip:
            continue
        if in_string:
            if c == "\\":
                skip = i + 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return i
        elif c in "]}":
            depth -= 1
    return None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _Float(float):
    """A number read as a float that keeps the text it was written as, for messages: JSON's
    ``1e400`` is ``inf`` to Python, but an error says "got 1e400", as the user wrote it.
    Only numbers whose ``repr`` is not their text become one (see `_as_written`): a
    document of many plain numbers costs no more than floats."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, value: float, text: str) -> _Float:
        self = super().__new__(cls, value)
        self.text = text
        return self

    def __repr__(self) -> str:
        return self.text


def _as_written(value: float, text: str) -> float:
    """``value``, keeping ``text`` for messages only where ``repr(value)`` would say another thing."""
    return value if repr(value) == text else _Float(value, text)


def _json_float(text: str) -> float:
    return _as_written(float(text), text)


def _load_json(text: str) -> Any:
    """Parse JSON text; DecodeError with the parser's position. Duplicate keys are refused (as protojson does)."""
    deep = _json_too_deep(text)
    if deep is not None:
        line, column = _line_col(text, deep)
        raise DecodeError("", f"nested deeper than {MAX_NESTING} levels", format="json", line=line, column=column)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_float=_json_float)
    except json.JSONDecodeError as exc:
        raise DecodeError("", f"malformed JSON: {exc.msg}", format="json", line=exc.lineno, column=exc.colno) from None
    except _DuplicateKey as exc:
        raise DecodeError(exc.key, "the key appears twice in one object", format="json") from None
    except RecursionError:  # pragma: no cover - _json_too_deep stops this first
        raise DecodeError("", f"nested deeper than {MAX_NESTING} levels", format="json") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise DecodeError("", f"malformed JSON: {exc}", format="json") from None


class _YamlLimit(yaml.MarkedYAMLError):
    """A YAML input over one of the limits (alias expansion, nesting): refused, not malformed."""


class _BoundedLoader(yaml.SafeLoader):
    """yaml's safe loader with limits: alias expansion, nesting depth, duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._alias_nodes = 0
        self._expanded: dict[int, int] = {}  # id(node) -> its size with aliases expanded

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            target = self.anchors.get(event.anchor)
            if target is not None:
                size = self._expanded.get(id(target))
                if size is None:
                    raise _YamlLimit(
                        problem=f"alias *{event.anchor} is used inside the node it names (a recursive structure)",
                        problem_mark=event.start_mark,
                    )
                self._alias_nodes += size
                if self._alias_nodes > MAX_YAML_ALIAS_NODES:
                    raise _YamlLimit(
                        problem=f"aliases expand to more than {MAX_YAML_ALIAS_NODES} nodes",
                        problem_mark=event.start_mark,
                    )
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise _YamlLimit(
                    problem=f"nested deeper than {MAX_NESTING} levels",
                    problem_mark=self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        self._expanded[id(node)] = 1 + sum(self._expanded.get(id(c), 1) for c in children)
        return node

    def construct_yaml_int(self, node: Any) -> Any:
        # YAML 1.1 integers are also hexadecimal, octal, binary and base 60 ("1:30"): PyYAML
        # converts base 60 digit by digit (quadratic in the length) and the others without
        # Python's limit on digits; so no integer may be longer than that limit, as in JSON.
        text = str(node.value)
        if len(text) > MAX_INT_DIGITS:
            raise _YamlLimit(
                problem=f"an integer of {len(text):,} characters (at most {MAX_INT_DIGITS:,} digits are read)",
                problem_mark=node.start_mark,
            )
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: Any) -> Any:
        value = super().construct_yaml_float(node)
        return _as_written(value, node.value)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if key.value in seen:
                    raise yaml.constructor.ConstructorError(
                        problem=f"the key {brief(key.value)} appears twice in one mapping",
                        problem_mark=key.start_mark,
                    )
                seen.add(key.value)
        return super().construct_mapping(node, deep)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)


def _yaml_error(exc: Exception, text: str) -> DecodeError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(str(p) for p in (exc.context, exc.problem) if p)
        reason = what if isinstance(exc, _YamlLimit) else f"malformed YAML: {what}"
        if mark is None:
            return DecodeError("", reason, format="yaml")
        return DecodeError("", reason, format="yaml", line=mark.line + 1, column=mark.column + 1)
    if isinstance(exc, yaml.reader.ReaderError):
        line, column = _line_col(text, exc.position)
        reason = f"malformed YAML: character #x{exc.character:04x} is not allowed ({exc.reason})"
        return DecodeError("", reason, format="yaml", line=line, column=column)
    # A constructor's own ValueError: a timestamp such as 2024-13-45, an integer too long to convert.
    return DecodeError("", f"malformed YAML: {exc}", format="yaml")


def load_yaml(text: str) -> Any:
    """Parse one YAML document with the safe loader and the limits above; DecodeError otherwise."""
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # the reader checks every character here
        return loader.get_single_data()
    except (yaml.YAMLError, ValueError, OverflowError) as exc:
        raise _yaml_error(exc, text) from None
    except RecursionError:  # pragma: no cover - the nesting limit stops this first
        raise DecodeError("", f"nested deeper than {MAX_NESTING} levels", format="yaml") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_document(data: bytes | str, format: Literal["json", "yaml"] | None = None) -> Any:
    """A JSON or YAML document (a task template) with the limits of `decode`.

    ``format`` None reads JSON when the text is JSON, else YAML. DecodeError on any failure.
    """
    _check_size(data)
    text = _as_text(data, format or "")
    if format == "json":
        return _load_json(text)
    if format == "yaml":
        return load_yaml(text)
    if text.lstrip()[:1] in ("{", "["):
        try:
            return _load_json(text)
        except DecodeError as json_error:
            if not _FLOW_YAML.match(text.lstrip()):
                raise json_error from None
    return load_yaml(text)


# --------------------------------------------------------------------------- decode: detection

#: Non-whitespace control characters: text has none; binary usually does.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
#: "{" or "[" then an unquoted word: flow YAML rather than JSON.
_FLOW_YAML = re.compile(r"[\[{]\s*(?!(?:true|false|null)\b)[A-Za-z_]")
#: A line "name {" or "name <": a textproto message field (YAML has no such line).
_TEXTPROTO_LINE = re.compile(r"^[ \t]*\[?[A-Za-z_][\w.]*\]?[ \t]*[{<]", re.M)
#: A line "key:" with nothing after it, a "- item", a document marker or directive: YAML.
_YAML_LINE = re.compile(
    r"^(?:[ \t]*[^\s#:{}<>\[\]]+[ \t]*:[ \t]*(?:#.*)?$|[ \t]*-(?:[ \t]|$)|(?:---|\.\.\.)(?:\s|$)|%)", re.M
)


def _prefer_yaml(text: str, yaml_error: DecodeError, textproto_error: DecodeError) -> bool:
    """Which parser's error to report when neither reads the text: the one it resembles."""
    if _TEXTPROTO_LINE.search(text):
        return False
    if _YAML_LINE.search(text):
        return True
    # Neither shape shows: the parser that read further before failing.
    return (yaml_error.line or 0, yaml_error.column or 0) > (textproto_error.line or 0, textproto_error.column or 0)


def _detect_text(text: str, task_type_version: int) -> tuple[Task, Format]:
    s = text.lstrip()
    if not s or s.startswith(TEXTPROTO_HEADER.strip()):
        return _decode_textproto(text, task_type_version), "textproto"
    if s[0] in "{[":
        try:
            obj = _load_json(text)
        except DecodeError as json_error:
            # Flow YAML ({a: 1}) starts like JSON; report JSON's error unless it looks like YAML.
            try:
                obj = load_yaml(text)
            except DecodeError as flow_error:
                raise (flow_error if _FLOW_YAML.match(s) else json_error) from None
            return _from_mapping(obj, task_type_version, "yaml"), "yaml"
        return _from_mapping(obj, task_type_version, "json"), "json"
    yaml_error: DecodeError | None = None
    try:
        obj = load_yaml(text)
    except DecodeError as exc:
        yaml_error = exc
    if yaml_error is None:
        # Flat textproto ("a: 1") is also YAML and decodes the same; "a { b: 1 }" is
        # YAML too, but a YAML reader would make "a { b" a key.
        if obj is None or (isinstance(obj, Mapping) and not _TEXTPROTO_LINE.search(text)):
            return _from_mapping(obj, task_type_version, "yaml"), "yaml"
        if not isinstance(obj, (str, Mapping)):  # 42, a list, true: YAML, but no task
            return _from_mapping(obj, task_type_version, "yaml"), "yaml"
    try:
        return _decode_textproto(text, task_type_version), "textproto"
    except DecodeError as textproto_error:
        if yaml_error is not None and _prefer_yaml(text, yaml_error, textproto_error):
            raise yaml_error from None
        raise


def _detect(data: bytes | str, task_type_version: int) -> tuple[Task, Format]:
    """Decode data of no stated format: the task and the format that read it.

    Binary when the bytes are not text (a NUL or control character, or not UTF-8);
    then JSON when the text starts with "{" or "[", else YAML or textproto, whichever
    reads it. When none does, the error is that of the format the input resembles,
    with its position.
    """
    if isinstance(data, str):
        return _detect_text(_as_text(data, ""), task_type_version)
    by_bom = _bom_encoding(data)  # no binary task starts with a BOM (wire types 6 and 7 do not exist)
    if by_bom is not None:
        raise _not_utf8_text(by_bom, "")
    try:
        text = data.decode("utf-8")
        binary_like = bool(_CONTROL.search(text))
        utf8_error = None
    except UnicodeDecodeError as exc:
        binary_like, utf8_error = True, exc
    if binary_like:
        try:
            return _decode_binary(data, task_type_version), "binary"
        except DecodeError:
            other = _other_encoding(data)
            if other is not None:
                raise _not_utf8_text(other, "") from None
            if not _looks_like_text(data):
                raise
            if utf8_error is not None:
                raise _utf8_error(data, utf8_error, "") from None
            # Text with a stray control character: the text parser says where.
    return _detect_text(_as_text(data, ""), task_type_version)


def detect_format(data: bytes | str) -> Format:
    """The format `decode` reads ``data`` as, when no format is given.

    For input that no parser reads, the format whose error `decode` reports
    ("binary" for bytes that are no text in any format).

    Raises:
        DecodeError: The input is larger than `MAX_TASK_BYTES`.
        TypeError: ``data`` is neither bytes nor str.
    """
    data = _serialized(data, "detect_format()")
    try:
        return _detect(data, 1)[1]
    except DecodeError as exc:
        for fmt in FORMATS:
            if exc.format == fmt:
                return fmt
        return "binary"


def _serialized(data: object, caller: str) -> bytes | str:
    """``data`` as bytes or str within `MAX_TASK_BYTES`; TypeError or DecodeError otherwise."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, (bytes, str)):
        raise TypeError(
            f"{caller} takes a serialized task as bytes or str, or the custom dict, got {type(data).__name__}; "
            "a task message needs no decoding"
        )
    _check_size(data)
    return data


def _check_size(data: bytes | str) -> None:
    size = len(data)
    if isinstance(data, str) and size <= MAX_TASK_BYTES and not data.isascii():  # ASCII: 1 byte a character
        size = len(data.encode("utf-8", "surrogatepass"))
    if size > MAX_TASK_BYTES:
        raise _too_large()


# --------------------------------------------------------------------------- decode: binary


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


def _varint_at(raw: bytes, i: int) -> tuple[int, int] | None:
    """(value, next index) of the varint at i, or None when it is cut off or longer than 10 bytes."""
    value = shift = 0
    for j in range(i, min(i + 10, len(raw))):
        b = raw[j]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, j + 1
        shift += 7
    return None


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    found = _varint_at(raw, i)
    if found is None:  # pragma: no cover - only called on bytes protobuf has parsed
        raise DecodeError("", "a varint is cut off", format="binary", offset=i)
    return found


_BY_NUMBER: dict[str, dict[int, FieldDescriptor]] = {}


def _fields_by_number(desc: Descriptor) -> dict[int, FieldDescriptor]:
    """field number -> field of a message type, built once per type."""
    table = _BY_NUMBER.get(desc.full_name)
    if table is None:
        table = _BY_NUMBER[desc.full_name] = {f.number: f for f in desc.fields}
    return table


def _check_wire_types(raw: bytes, desc: Descriptor, path: str, version: int) -> None:
    """Refuse a known field number written with another wire type.

    protobuf keeps such a field as an unknown field, so bytes of the other task
    shape (legacy ``workers = 1`` is a number, kubeflow field 1 a message) would
    decode into a task that silently lacks them. Unknown field numbers stay
    allowed: a newer schema may send them. Runs after a successful parse, so the
    bytes are well-formed.
    """
    by_number = _fields_by_number(desc)
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
        packed = wire == _LEN and is_repeated(f) and expected != _LEN
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


def _binary_problem(raw: bytes, desc: Descriptor, base: int = 0) -> tuple[int, str] | None:
    """Where and why bytes are no valid message of ``desc``: (byte offset, reason), or None if not found.

    Walks the fields, and into the known message fields, as protobuf would; used
    only to explain a failed parse, so it may give up (groups) and return None.
    """
    by_number = _fields_by_number(desc)
    i, end = 0, len(raw)
    while i < end:
        start = base + i
        key = _varint_at(raw, i)
        if key is None:
            return start, "a field key is cut off (truncated input?)"
        number, wire = key[0] >> 3, key[0] & 7
        i = key[1]
        if number == 0:
            return start, "field number 0 does not exist (garbled, or not protobuf)"
        if wire == _VARINT:
            value = _varint_at(raw, i)
            if value is None:
                return start, f"field {number}: its varint is cut off (truncated input?)"
            i = value[1]
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if i + size > end:
                return start, f"field {number}: its {size}-byte value is cut off (truncated input?)"
            i += size
        elif wire == _LEN:
            length = _varint_at(raw, i)
            if length is None:
                return start, f"field {number}: its length is cut off (truncated input?)"
            size, i = length
            if i + size > end:
                return start, f"field {number}: length {size} runs past the end ({end - i} bytes left)"
            f = by_number.get(number)
            body = raw[i : i + size]
            if f is not None and f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type is not None:
                inner = _binary_problem(body, f.message_type, base + i)
                if inner is not None:
                    return inner
            elif f is not None and f.type == FieldDescriptor.TYPE_STRING:
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return base + i + exc.start, f"field {number} ({desc.name}.{f.name}): the string is not UTF-8"
            i += size
        elif wire in (3, 4):  # groups: proto2 only; leave the explanation to protobuf
            return None
        else:
            return start, f"field {number}: wire type {wire} does not exist (garbled, or not protobuf)"
    return None


def _decode_binary(raw: bytes, task_type_version: int) -> Task:
    cls = task_class(task_type_version)
    msg = cls()
    try:
        msg.ParseFromString(raw)
    except (_PbDecodeError, RuntimeError, ValueError) as exc:
        found = _binary_problem(raw, cls.DESCRIPTOR)
        if found is not None:
            offset, problem = found
            raise DecodeError(
                "", f"not a valid {cls.DESCRIPTOR.name}: {problem}", format="binary", offset=offset
            ) from None
        raise DecodeError(
            "", f"not a valid {cls.DESCRIPTOR.name} (truncated or garbled binary: {exc})", format="binary"
        ) from None
    if _had_unknown_fields(msg, raw):
        # Only now can a known field have had the wrong wire type; the task keeps its
        # unknown fields (a newer schema may send them), so parse the bytes again.
        _check_wire_types(raw, cls.DESCRIPTOR, "", task_type_version)
        msg = cls()
        msg.ParseFromString(raw)
    return msg


def _had_unknown_fields(msg: Message, raw: bytes) -> bool:
    """Drop the unknown fields the parse of ``raw`` kept, at any depth; whether there were any.

    A known field written with another wire type is kept as an unknown field. The common case
    costs one serialization: without its unknown fields the message serializes to exactly
    ``raw`` only if ``raw`` held nothing else (what a protobuf serializer writes). Otherwise (a
    non-canonical encoding, or unknown fields) the sizes decide: every unknown field is at least
    2 bytes, so with them the same parse serializes longer. In place: no copy on the common path.
    """
    msg.DiscardUnknownFields()
    if msg.SerializeToString() == raw:
        return False
    again = type(msg)()
    again.ParseFromString(raw)
    return bool(again.ByteSize() != msg.ByteSize())


#: task message full name -> its task_type_version (a textproto header names one).
_VERSION_BY_NAME = {c.DESCRIPTOR.full_name: v for v, c in TASK_CLASSES.items()}


def _class_for(task_type_version: int, header_name: str | None) -> type[Message]:
    cls = task_class(task_type_version)
    if header_name is not None and header_name != cls.DESCRIPTOR.full_name:
        by_name = _VERSION_BY_NAME
        if header_name not in by_name:
            raise DecodeError(
                "", f"header names {brief(header_name)}, which is not a task message of this schema", format="textproto"
            )
        raise DecodeError(
            "",
            f"header names {header_name} (task_type_version {by_name[header_name]}) "
            f"but task_type_version {task_type_version} was requested",
            format="textproto",
        )
    return cls


def decode(
    data: bytes | bytearray | memoryview | str | Mapping[str, Any],
    *,
    format: Format | None = None,
    task_type_version: int = 1,
    strict: bool = True,
) -> Task:
    """Decode a serialized task of the shape ``task_type_version`` names.

    Strict by default: a JSON/YAML key or enum name this version does not know is a DecodeError.
    Binary unknown field numbers are kept either way (protobuf's rule; re-encoding keeps their
    bytes). ``strict=False`` is the forward-compatible decode of a newer SDK's task: unknown keys
    and enum names are left out, and every unknown field (binary ones included) is named by a
    `SkewWarning`. Textproto is always strict.

    Args:
        data: The serialized task: ``bytes`` (any format; also ``bytearray`` and
            ``memoryview``) or ``str`` (a text format), at most `MAX_TASK_BYTES`.
            A mapping is read as the ``TaskTemplate.custom`` dict (`from_custom`).
        format: One of `FORMATS`; None detects it: binary when the bytes are
            not text, else JSON, YAML or textproto, whichever reads it (when none
            does, the error of the one the text resembles, with its position).
        task_type_version: 0 for the legacy shape, 1 (default) for the kubeflow shape.
        strict: False for the forward-compatible decode (above).

    Raises:
        DecodeError: The data is not a valid encoding of that message; names the
            field, or the position (line and column, or byte offset) where the parser stopped.
        UnsupportedVersionError: task_type_version is not 0 or 1.
        TypeError: ``data`` is neither bytes, str nor a mapping.
    """
    if not strict:
        return _decode_tolerant(data, format, task_type_version)
    if type(data) is bytes and format == "binary":  # the hot path (a TaskTemplate's bytes): same checks, in order
        if len(data) > MAX_TASK_BYTES:
            raise _too_large()
        return _decode_binary(data, task_type_version)  # task_class() there refuses a bad version
    if isinstance(data, Mapping):
        if format is not None:
            raise TypeError("decode(): a mapping is the custom dict, already parsed; leave out format")
        return from_custom(data, task_type_version=task_type_version, strict=True)
    data = _serialized(data, "decode()")
    task_class(task_type_version)
    if format is not None and format not in FORMATS:
        raise DecodeError("", f"unknown format {brief(format)}; expected one of {', '.join(FORMATS)}")
    if format is None:
        return _detect(data, task_type_version)[0]
    if format == "binary":
        return _decode_binary(data.encode("utf-8") if isinstance(data, str) else data, task_type_version)
    text = _as_text(data, format)
    if format == "textproto":
        return _decode_textproto(text, task_type_version)
    obj = _load_json(text) if format == "json" else load_yaml(text)
    return _from_mapping(obj, task_type_version, format)


def _decode_tolerant(data: Any, format: Format | None, task_type_version: int) -> Task:
    """decode(strict=False): the strict decode's checks, less unknown keys and enum names; each unknown named."""
    if isinstance(data, Mapping):
        if format is not None:
            raise TypeError("decode(): a mapping is the custom dict, already parsed; leave out format")
        return from_custom(data, task_type_version=task_type_version)
    if format in ("json", "yaml"):
        data = _serialized(data, "decode()")
        task_class(task_type_version)
        text = _as_text(data, format)
        obj = _load_json(text) if format == "json" else load_yaml(text)
        unknown: list[str] = []
        task = _from_mapping(obj, task_type_version, format, unknown)
        _other_shape(unknown, task_type_version)
        warn_unknown(unknown)
        return task
    task = decode(data, format=format, task_type_version=task_type_version)
    warn_unknown(unknown_fields(task))
    return task


class CustomTemplate(NamedTuple):
    """What a Flyte SDK writes into the ``TaskTemplate`` for an elastic task.

    Attributes:
        custom: ``TaskTemplate.custom``; None for a single-node (``python-task``) task, like flytekit.
        task_type: ``"pytorch"`` (a PyTorchJob) or ``"python-task"`` (one plain pod).
        task_type_version: 1, the kubeflow task shape.
    """

    custom: dict[str, Any] | None
    task_type: str
    task_type_version: int


def from_custom(
    custom: Mapping[str, Any] | CustomTemplate | None,
    task_type: str | None = None,
    task_type_version: int | None = None,
    *,
    strict: bool = False,
) -> Task:
    """The task from a ``TaskTemplate``'s custom dict, task type and version, as flytekit or we emit it.

    ``from_custom(custom)``, ``from_custom(custom, "pytorch", 1)``, ``from_custom(template)``
    and ``from_custom(*template)`` (a `CustomTemplate`, e.g. ``Elastic(...).to_template()``)
    all work. Decodes only (like `decode`); run `elastic_idl.validate` or
    ``Elastic.from_task`` on the result. Accepts camelCase and snake_case keys, and
    integral floats for integers (a protobuf Struct stores every number as a double).

    Forward compatible, as the backend's entry point must be: a key this version does not know
    (a newer SDK's field) or an enum value name it does not know is left out, and each is named
    by a `SkewWarning` (``warning.fields``: its path, e.g. ``elastic_config.futureKnob``).
    ``strict=True`` refuses them instead (a DecodeError, as `decode` does).

    Args:
        custom: ``TaskTemplate.custom``, or a whole `CustomTemplate` (then give nothing else).
        task_type: The template's task type; None means ``"pytorch"``.
        task_type_version: 0 (legacy shape) or 1 (kubeflow shape); None means 1.
        strict: Refuse unknown keys and enum names instead of warning.

    Raises:
        DecodeError: The custom dict is not a task (names the field), or the template is a
            ``python-task``: flytekit writes no custom for a single-node elastic task, so there
            is nothing to decode (its settings live in the Python ``Elastic`` object).
        UnsupportedVersionError: task_type_version is not 0 or 1.
        TypeError: A CustomTemplate was given together with a task type or version.
    """
    if isinstance(custom, CustomTemplate):
        if task_type is not None or task_type_version is not None:
            raise TypeError("from_custom(): a CustomTemplate carries its task type and version; give it alone")
        custom, task_type, task_type_version = custom
    task_type = TASK_TYPE if task_type is None else task_type
    task_type_version = TASK_TYPE_VERSION if task_type_version is None else task_type_version
    if task_type == STANDALONE_TASK_TYPE:
        raise DecodeError(
            "task_type",
            "a python-task template carries no elastic config (flytekit keeps a single-node Elastic "
            "in the Python object); build the task with Elastic(...).to_task()",
            format="custom",
        )
    if task_type != TASK_TYPE:
        raise DecodeError(
            "task_type", f"{task_type!r} is not an elastic PyTorch task type ({TASK_TYPE!r})", format="custom"
        )
    if custom is None:
        raise DecodeError("", "a pytorch task template needs a custom dict, got None", format="custom")
    if strict:
        return _from_mapping(custom, task_type_version, "custom")
    unknown: list[str] = []
    task = _from_mapping(custom, task_type_version, "custom", unknown)
    _other_shape(unknown, task_type_version)
    warn_unknown(unknown)
    return task


def _other_shape(unknown: Sequence[str], task_type_version: int) -> None:
    """A top-level key of the other task shape is the flyteplugins#359 skew, never a newer field: refused."""
    for path in unknown:
        for version, cls in TASK_CLASSES.items():
            if version != task_type_version and "." not in path and _field_by_key(cls.DESCRIPTOR, path):
                raise DecodeError(
                    path,
                    f"a field of the task_type_version {version} shape, but the template says {task_type_version}: "
                    "the backend would drop it (flyteplugins#359)",
                    format="custom",
                )


#: Why a field a tolerant decode meets is left out (the SkewWarning's text after the field).
UNKNOWN_FIELD = "not a field (or enum value) this version knows, from a newer schema?; ignored"
#: Why a reader of user files (the CLI) refuses a binary field number the strict decode kept.
UNKNOWN_FIELD_NUMBER = "a field number this version does not know (from a newer schema?); a task file is read strictly"


def warn_unknown(paths: Sequence[str]) -> None:
    """One `SkewWarning` per field path a tolerant decode left out."""
    for path in paths:
        warnings.warn(SkewWarning(f"{path}: {UNKNOWN_FIELD}", fields=(path,)), stacklevel=3)


def unknown_fields(msg: Message) -> list[str]:
    """The unknown fields a parsed message keeps, at any depth, as paths: ``elastic_config.99``.

    A field number stands for the name this version does not know. Repeated and nested messages
    are walked (``rdzv_options[0].7``). The bytes stay in the message (re-serializing keeps them).
    """
    out: list[str] = []
    _walk_unknown(msg, "", out)
    return out


def _walk_unknown(msg: Message, path: str, out: list[str]) -> None:
    seen: set[int] = set()
    fields = _UnknownFieldSet(msg)
    for i in range(len(fields)):
        field = fields[i]
        if field.field_number not in seen:
            seen.add(field.field_number)
            out.append(f"{path}.{field.field_number}" if path else str(field.field_number))
    for f, value in msg.ListFields():
        if f.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        fpath = f"{path}.{f.name}" if path else f.name
        if is_repeated(f):
            for i, item in enumerate(value):
                _walk_unknown(item, f"{fpath}[{i}]", out)
        else:
            _walk_unknown(value, fpath, out)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _from_mapping(obj: Any, task_type_version: int, fmt: str, unknown: list[str] | None = None) -> Task:
    cls = task_class(task_type_version)
    if obj is None and fmt == "yaml":
        obj = {}  # an empty YAML document (an empty file): the empty task
    if not isinstance(obj, Mapping):
        raise DecodeError("", f"expected an object of task fields at the top level, got {_kind(obj)}", format=fmt)
    normalised = _check_mapping(obj, cls.DESCRIPTOR, "", fmt, unknown)
    msg = cls()
    try:
        json_format.ParseDict(normalised, msg, ignore_unknown_fields=False)
    except (json_format.ParseError, TypeError, ValueError, AttributeError) as exc:
        raise DecodeError(_guess_field(str(exc), cls.DESCRIPTOR), str(exc), format=fmt) from None
    return msg


def _guess_field(text: str, desc: Descriptor) -> str:
    """The field path a protobuf JSON error names, as field names (protobuf writes JSON names)."""
    # protobuf's messages say "Failed to parse <name> field: ..." per nesting level.
    names = re.findall(r"Failed to parse (\w+) field", text)
    if not names:
        m = re.search(r'no field named "([^"]+)"', text)
        names = [m.group(1)] if m else []
    path: list[str] = []
    current: Descriptor | None = desc
    for name in names:
        f = _field_by_key(current, name) if current is not None else None
        path.append(f.name if f is not None else name)
        current = f.message_type if f is not None else None
    return ".".join(path)


def _field_by_key(desc: Descriptor, key: str) -> FieldDescriptor | None:
    for f in desc.fields:
        if key in (f.name, f.json_name):
            return f
    return None


def is_repeated(f: FieldDescriptor) -> bool:
    # protobuf >= 5.28 has is_repeated; protobuf 7 removed `label`.
    flag = getattr(f, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(getattr(f, "label", None) == FieldDescriptor.LABEL_REPEATED)  # pragma: no cover - protobuf < 5.28


def _check_mapping(
    obj: Mapping[Any, Any], desc: Descriptor, path: str, fmt: str, unknown: list[str] | None = None
) -> dict[str, Any]:
    """Walk a dict against a message descriptor, so errors name the exact field.

    Returns a copy in which integral doubles of integer and enum fields are ints
    (a protobuf Struct stores every number as a double). With an ``unknown`` list (a
    tolerant decode), an unknown key or enum name is appended there and left out.
    """
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise DecodeError(path, f"object keys must be strings, got {brief(key)}", format=fmt)
        f = _field_by_key(desc, key)
        if f is None:
            fpath = f"{path}.{key}" if path else key
            if unknown is not None:
                unknown.append(fpath)
                continue
            known = sorted(x.json_name for x in desc.fields)
            hint = _other_shape_hint(desc, key) or did_you_mean(key, [*known, *(x.name for x in desc.fields)])
            # The hint first: a message is cut at MAX_ERROR_CHARS, and the list of known keys is long.
            raise DecodeError(fpath, f"unknown field of {desc.name}{hint} (known: {', '.join(known)})", format=fmt)
        fpath = f"{path}.{f.name}" if path else f.name
        if f.name in given:
            raise DecodeError(fpath, f"given twice, as {given[f.name]!r} and {key!r}", format=fmt)
        given[f.name] = key
        if value is None:
            out[key] = None  # JSON null means "unset" in proto3 JSON
        elif is_repeated(f):
            if not isinstance(value, list):
                raise DecodeError(fpath, _not_a_list(f, value), format=fmt)
            items = [_check_value(f, item, f"{fpath}[{i}]", fmt, unknown) for i, item in enumerate(value)]
            out[key] = [item for item in items if item is not _SKIPPED]
        else:
            item = _check_value(f, value, fpath, fmt, unknown)
            if item is not _SKIPPED:
                out[key] = item
    return out


def _other_shape_hint(desc: Descriptor, key: str) -> str:
    """For an unknown top-level key that the other task shape has: which version to read the input as."""
    version = _VERSION_BY_NAME.get(desc.full_name)
    if version is None:
        return ""
    other = 1 - version
    if _field_by_key(TASK_CLASSES[other].DESCRIPTOR, key) is None:
        return ""
    shape = "legacy" if other == 0 else "kubeflow"
    return (
        f"; {key!r} is a field of the {shape} task shape: read the input as task_type_version {other} "
        f"(command line: --task-type-version {other})"
    )


def _not_a_list(f: FieldDescriptor, value: Any) -> str:
    """Why a repeated field's value is refused, with the shape it needs."""
    mt = f.message_type
    if mt is None:
        return f"expected a list, got {_kind(value)} {brief(value)}"
    names = [x.json_name for x in mt.fields]
    shape = f"expected a list of {mt.name} objects ({', '.join(names)}), got {_kind(value)}"
    if isinstance(value, Mapping) and names == ["key", "value"] and value:
        # A mapping of options (what a YAML user writes): say how the list of pairs spells it.
        pairs = [{"key": str(k), "value": v if isinstance(v, str) else json.dumps(v)} for k, v in value.items()]
        return f"{shape}; write it as {brief(pairs)}"
    return shape


#: What _check_value returns for an enum name a tolerant decode leaves out.
_SKIPPED: Any = object()


def _integer(value: Any, path: str, fmt: str, lo: int, hi: int) -> int:
    number: Any = value
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            raise DecodeError(path, f"expected an integer, got {brief(value)}", format=fmt) from None
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int):
        raise DecodeError(path, f"expected an integer, got {brief(value)}", format=fmt)
    if not lo <= number <= hi:
        try:
            shown = str(number)
        except ValueError:  # more digits than Python writes (a YAML 0x..., a Python int in a custom dict)
            shown = brief(number)
        raise DecodeError(path, f"{shown} is out of range {lo}..{hi}", format=fmt)
    return number


def _check_value(f: FieldDescriptor, value: Any, path: str, fmt: str, unknown: list[str] | None = None) -> Any:
    t = f.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        mt = f.message_type
        if mt is None:  # pragma: no cover - every message field has a type
            return value
        full = mt.full_name
        if full == "google.protobuf.Duration":
            if not (isinstance(value, str) and _DURATION_RE.match(value)):
                reason = f'expected a duration such as "30s" or "1.5s", got {brief(value)}'
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    reason += f' (a number of seconds is written with an s, as a string: "{value!r}s")'
                raise DecodeError(path, reason, format=fmt)
            return value
        if full == "google.protobuf.Timestamp":
            if not isinstance(value, str):
                raise DecodeError(path, f"expected an RFC 3339 timestamp string, got {brief(value)}", format=fmt)
            return value
        if not isinstance(value, Mapping):
            raise DecodeError(path, f"expected an object ({mt.name}), got {type(value).__name__}", format=fmt)
        return _check_mapping(value, mt, path, fmt, unknown)
    if t == FieldDescriptor.TYPE_ENUM:
        et = f.enum_type
        if et is None:  # pragma: no cover - every enum field has a type
            return value
        names = [v.name for v in et.values]
        if isinstance(value, str):
            name = enum_value_name(et, value)  # the name, or a short name ("spawn"); written back as the name
            if name is None:
                if unknown is not None:
                    unknown.append(path)
                    return _SKIPPED
                raise DecodeError(path, f"unknown {et.name} {brief(value)}; {_enum_expected(et, value)}", format=fmt)
            return name
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # A number: kept even when the schema does not define it (proto3 enums are open);
            # validation reports it as enum.known.
            return _integer(value, path, fmt, *INT32)
        raise DecodeError(path, f"expected one of {', '.join(names)}, got {brief(value)}", format=fmt)
    if t in _INT_TYPES:
        return _integer(value, path, fmt, *_INT_TYPES[t])
    if t == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise DecodeError(path, f"expected true or false, got {brief(value)}", format=fmt)
    elif t == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise DecodeError(path, f"expected a string, got {type(value).__name__} {brief(value)}", format=fmt)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # JSON's "\ud800": protobuf strings are UTF-8
            raise DecodeError(path, f"not valid UTF-8 (a lone surrogate): {brief(value)}", format=fmt) from None
    return value


def _enum_expected(enum_type: EnumDescriptor, text: str) -> str:
    """What an enum field takes, and the value ``text`` looks like a typo of."""
    short = ENUM_SHORT_NAMES.get(enum_type.full_name, {})
    names = ", ".join(v.name for v in enum_type.values)
    differ = any(s != n.lower() for n, s in short.items())  # ResourceName's are its names
    also = f", or {', '.join(short.values())} (any case)" if differ else " (any case)"
    match = enum_suggestion(enum_type, text)
    return f"expected one of {names}{also}" + (f"; did you mean {match!r}?" if match else "")


def _decode_textproto(text: str, task_type_version: int) -> Task:
    header: str | None = None
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if first.startswith(TEXTPROTO_HEADER.strip()):
        header = first.split(":", 1)[1].strip()
    cls = _class_for(task_type_version, header)
    msg = cls()
    try:
        with warnings.catch_warnings():
            # protobuf reads a string's escapes with Python's unicode_escape decoder, which keeps an
            # unknown escape such as \e as it is and says so with a DeprecationWarning from deep
            # inside; the Go decoder keeps it the same way, so the task is the same on both sides.
            warnings.simplefilter("ignore", DeprecationWarning)
            text_format.Parse(text, msg)
    except text_format.ParseError as exc:
        raise _textproto_error(text, exc) from None
    except ValueError as exc:
        raise DecodeError(_textproto_field(text, str(exc)), f"bad textproto: {exc}", format="textproto") from None
    return msg  # type: ignore[return-value]


def _textproto_error(text: str, exc: text_format.ParseError) -> DecodeError:
    """protobuf's error, with its position as line/column and without its echo of the input line."""
    message = str(exc)
    line, column = exc.GetLine(), exc.GetColumn()
    m = re.match(r"\d+(?::\d+)? : ", message)
    if m:
        message = message[m.end() :]
    lines = text.split("\n")
    if line is not None and 1 <= line <= len(lines):
        echo = f"'{lines[line - 1]}': "
        if message.startswith(echo):
            message = message[len(echo) :]
    if "codec can't" in message:
        # protobuf Python reads a string's escapes with Python's own decoder, which knows \N{NAME}
        # and then cannot store the character: its error speaks of latin-1.
        message = (
            "a string holds an escape protobuf's text format does not have (such as \\N{...}); "
            "write the character itself (the file is UTF-8) or a \\u or \\x escape"
        )
    field = _textproto_field(text, str(exc))
    m = re.search(r'Enum type "([\w.]+)" has no value named ([\w-]+)', message)
    enum_type = _ENUMS.get(m.group(1)) if m else None
    if m and enum_type is not None:
        value = m.group(2)
        name = enum_value_name(enum_type, value)
        match = name or enum_suggestion(enum_type, value)
        hint = f"; did you mean {match!r}?" if match else ""
        if name is not None:  # a short name: right in YAML and JSON, not in protobuf's own text format
            hint += f" (textproto takes the names protobuf defines; YAML and JSON also take {value!r})"
        message = message.rstrip(".") + hint if hint else message
    m = re.search(r'Message type "([\w.]+)" has no field named "(\w+)"', message)
    desc = _MESSAGES.get(m.group(1)) if m else None
    if m and desc is not None:
        # textproto takes the proto names only (JSON and YAML also take the JSON names)
        hint = _other_shape_hint(desc, m.group(2)) or did_you_mean(m.group(2), [f.name for f in desc.fields])
        message = message.rstrip(".") + hint if hint else message
    return DecodeError(field, f"bad textproto: {message}", format="textproto", line=line, column=column)


#: The schema's message types, by full name: what a textproto error's "Message type" names.
_MESSAGES = schema_messages()
#: The schema's enum types, by full name: what a textproto error's "Enum type" names.
_ENUMS = {f.enum_type.full_name: f.enum_type for d in _MESSAGES.values() for f in d.fields if f.enum_type is not None}


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
