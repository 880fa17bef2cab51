"""Kubernetes container resources: the quantity grammar and the API server's rules. Pure.

One home for these facts. The validation rule ``resources.quantity`` (a task's replica
resources) and ``render_pytorchjob(resources=...)`` both call `quantity_problems`,
so a quantity the API server would refuse is refused before anything is rendered.

The rules, as kube-apiserver applies them to a container (k8s.io/apimachinery
``resource.ParseQuantity``, the PyTorchJob CRD's quantity pattern, and
``ValidateResourceRequirements`` in pkg/apis/core/validation):

1. Syntax (`QUANTITY_PATTERN`, the whole string, no surrounding whitespace):
   optional sign ``+``/``-``; digits with an optional ``.`` and fraction (``1``, ``1.5``,
   ``1.``, ``.5``); then an optional suffix: binary ``Ki Mi Gi Ti Pi Ei`` (x 2^10 ... 2^60),
   decimal ``n u m k M G T P E`` (x 10^-9 ... 10^18), or an exponent ``e``/``E`` with a
   signed integer in int32 range (x 10^exp). Anything else, ``""`` included, is refused.
   (The API server's parser also reads a bare ``+``, ``-`` or ``.`` as 0 and the CRD
   pattern a fractional exponent; each is refused by the other, so neither is allowed here.)
2. The value: exact decimal arithmetic, rounded away from zero to a multiple of 10^-9
   (the API server keeps nothing finer), and a binary-suffixed value above 2^63-1 counts
   as 2^63-1 (the parser's cap).
3. Every request and limit is >= 0.
4. An extended resource (`is_extended`, e.g. ``nvidia.com/gpu``, which flyteidl's
   ``GPU`` renders as) is a whole number.
5. A request whose resource also has a limit is <= that limit; when the resource cannot be
   overcommitted (`overcommit_allowed`: extended resources and ``hugepages-*``), the
   two are equal. Within one list a name given twice counts once, its last value (a map).

Not checked here: the API server also refuses a request of a resource that cannot be
overcommitted (a GPU) without a limit for it, and a container resource name that is not
``cpu``, ``memory``, ``ephemeral-storage``, ``hugepages-*`` or an extended resource (so
``storage``). Refusing either would refuse what flytekit users write today; whether the
backend fills the GPU limit in is the backend's business.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_UP, Context, Decimal
from typing import NamedTuple

from elastic_idl._task.names import INT32

__all__ = [
    "BINARY_SUFFIXES",
    "DECIMAL_SUFFIXES",
    "QUANTITY_PATTERN",
    "QuantityProblem",
    "is_extended",
    "overcommit_allowed",
    "parse_quantity",
    "quantity_problems",
]

#: A Kubernetes quantity, matched against the whole string.
QUANTITY_PATTERN = (
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
#: Binary suffix -> power of 2.
BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
#: Decimal suffix -> power of 10 (no suffix: 0).
DECIMAL_SUFFIXES: dict[str, int] = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: The exponent of ``e``/``E`` must fit int32.
EXPONENT_MIN, EXPONENT_MAX = INT32
#: The finest value the API server keeps (10^-9): finer non-zero values round away from zero.
NANO = Decimal("1e-9")
#: A binary-suffixed value above this counts as this (the parser's cap).
BINARY_CAP = Decimal(2**63 - 1)
#: Name prefix of hugepages resources (native, but never overcommitted).
HUGEPAGES_PREFIX = "hugepages-"

_QUANTITY = re.compile(QUANTITY_PATTERN)
# Exact arithmetic: the values are decimal strings, never floats.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


#: Quantities up to this long are kept per text (tasks repeat the same few: "8", "64Gi"); a
#: longer one is parsed each time, so the cache holds at most 1024 x 64 characters, whatever the input.
_CACHED_CHARS = 64


def parse_quantity(text: str) -> Decimal:
    """The exact value of a Kubernetes quantity string, as the API server reads it.

    Linear in the length of ``text`` (a million digits are a million-digit Decimal, no worse).

    Raises:
        ValueError: ``text`` is not a quantity (the message says why).
    """
    if len(text) <= _CACHED_CHARS:
        return _parse_short(text)
    return _parse(text)


@functools.lru_cache(maxsize=1024)
def _parse_short(text: str) -> Decimal:
    return _parse(text)  # a Decimal is immutable: the cached one can be shared


def _parse(text: str) -> Decimal:
    m = _QUANTITY.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (such as '2', '500m', '4Gi' or '1e3'; no spaces)")
    sign, number, suffix = m.group("sign"), m.group("number"), m.group("suffix") or ""
    value = Decimal(sign + number)
    if suffix in BINARY_SUFFIXES:
        value = _EXACT.multiply(value, Decimal(2 ** BINARY_SUFFIXES[suffix]))
        if abs(value) > BINARY_CAP:
            value = BINARY_CAP.copy_sign(value)
    else:
        power = DECIMAL_SUFFIXES[suffix] if suffix in DECIMAL_SUFFIXES else int(suffix[1:])
        if not EXPONENT_MIN <= power <= EXPONENT_MAX:
            raise ValueError(f"{text!r}: the exponent does not fit in 32 bits")
        value = value.scaleb(power, _EXACT)
    digits_after = value.as_tuple().exponent  # an int: the value is finite
    if isinstance(digits_after, int) and digits_after < -9:
        value = value.quantize(NANO, rounding=ROUND_UP, context=_EXACT)
    return value


def is_extended(name: str) -> bool:
    """An extended resource: a domain-prefixed name outside ``kubernetes.io`` (``nvidia.com/gpu``).

    The API server counts these in whole units and never overcommits them.
    """
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def overcommit_allowed(name: str) -> bool:
    """Whether a request may be below its limit: native resources except hugepages."""
    return not is_extended(name) and not name.startswith(HUGEPAGES_PREFIX)


class QuantityProblem(NamedTuple):
    """One broken rule: which list (``"requests"``/``"limits"``), which entry of it, and why."""

    kind: str
    entry: int
    message: str


def quantity_problems(requests: Sequence[tuple[str, str]], limits: Sequence[tuple[str, str]]) -> list[QuantityProblem]:
    """Every rule of the module docstring that one container's resources break, in order.

    Args:
        requests: (Kubernetes resource name, quantity text) pairs, in order. A pair with an
            empty name or text is skipped (the caller reports those).
        limits: The same for limits.

    Returns:
        The problems, requests first; empty when the API server would accept the quantities.
    """
    out: list[QuantityProblem] = []
    values: dict[str, dict[str, tuple[int, Decimal]]] = {"requests": {}, "limits": {}}
    for kind, pairs in (("requests", requests), ("limits", limits)):
        for i, (name, text) in enumerate(pairs):
            if not text:
                continue
            try:
                value = parse_quantity(text)
            except ValueError as exc:
                out.append(QuantityProblem(kind, i, str(exc)))
                continue
            if value < 0:
                out.append(QuantityProblem(kind, i, f"{text!r} is negative; a {kind[:-1]} is >= 0"))
            elif name and is_extended(name) and value != value.to_integral_value(context=_EXACT):
                out.append(QuantityProblem(kind, i, f"{text!r} is not a whole number ({name} counts whole devices)"))
            elif name:
                values[kind][name] = (i, value)
    for name, (i, request) in values["requests"].items():
        if name not in values["limits"]:
            continue
        limit = limits[values["limits"][name][0]][1]
        if not overcommit_allowed(name) and request != values["limits"][name][1]:
            out.append(
                QuantityProblem(
                    "requests",
                    i,
                    f"{requests[i][1]!r} differs from the {name} limit {limit!r}: "
                    f"{name} cannot be overcommitted, so request and limit are equal",
                )
            )
        elif request > values["limits"][name][1]:
            out.append(QuantityProblem("requests", i, f"{requests[i][1]!r} is above the {name} limit {limit!r}"))
    out.sort(key=lambda p: (p.kind != "requests", p.entry))
    return out
