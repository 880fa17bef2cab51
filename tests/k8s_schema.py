"""Offline checks of an object against one version of a CustomResourceDefinition, as the API server
checks a create: the structural schema (types, required fields, enums, patterns, bounds; an unknown
field refused, as ``kubectl apply --validate=strict`` does) and the ``x-kubernetes-validations`` CEL
rules, evaluated with the ``common-expression-language`` package. Rules that compare with ``oldSelf``
are transition rules, which the API server runs on updates only: skipped here.

Not checked: ``format`` (int32, date-time, ...), defaults, and what a controller's admission webhook
adds (the cluster tests meet those).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import cel
import jsonschema

__all__ = ["CrdVersion", "crd_version"]


def _structural(node: Any) -> Any:
    """An OpenAPI v3 structural schema as a JSON Schema: unknown fields refused where the schema lists
    properties and neither allows more nor preserves unknown fields."""
    if isinstance(node, list):
        return [_structural(n) for n in node]
    if not isinstance(node, Mapping):
        return node
    out = {
        k: _structural(v)
        for k, v in node.items()
        if not k.startswith("x-kubernetes-") and k not in ("default", "properties")
    }
    if "properties" in node:  # a map of names to schemas, not a schema
        out["properties"] = {k: _structural(v) for k, v in node["properties"].items()}
        if "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


def _rules(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, Any, str, str]]:
    """(path, value, rule, message) of every creation-time CEL rule that applies to a part of ``value``."""
    for rule in schema.get("x-kubernetes-validations", ()):
        if "oldSelf" not in rule["rule"]:
            yield path, value, rule["rule"], rule.get("message", "")
    if isinstance(value, Mapping):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key in value:
            sub = props.get(key) or (extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                yield from _rules(value[key], sub, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _rules(item, schema["items"], f"{path}[{i}]")


def _rule_count(schema: Mapping[str, Any]) -> int:
    """The creation-time CEL rules anywhere in a schema."""
    own = sum(1 for r in schema.get("x-kubernetes-validations", ()) if "oldSelf" not in r["rule"])
    subs = [*schema.get("properties", {}).values(), schema.get("items"), schema.get("additionalProperties")]
    return own + sum(_rule_count(sub) for sub in subs if isinstance(sub, Mapping))


class CrdVersion:
    """One served version of a CRD: ``problems(obj)`` lists what the API server would refuse."""

    def __init__(self, crd: Mapping[str, Any], version: str) -> None:
        (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
        self.kind = crd["spec"]["names"]["kind"]
        self.api_version = f"{crd['spec']['group']}/{version}"
        self.schema = entry["schema"]["openAPIV3Schema"]
        self._validator = jsonschema.Draft7Validator(_structural(self.schema))
        self.rule_count = _rule_count(self.schema)

    def problems(self, obj: Mapping[str, Any]) -> list[str]:
        """``<path>: <what>`` for each schema error and each CEL rule the object breaks, schema first."""
        out = [
            f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
            for error in sorted(self._validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
        ]
        if obj.get("apiVersion") != self.api_version or obj.get("kind") != self.kind:
            out.append(f"<root>: not a {self.api_version} {self.kind}")
        for path, value, rule, message in _rules(obj, self.schema, ""):
            if not cel.evaluate(rule, {"self": value}):
                out.append(f"{path or '<root>'}: CEL rule {rule!r} failed{': ' + message if message else ''}")
        return out


def crd_version(crd: Mapping[str, Any], version: str) -> CrdVersion:
    """`CrdVersion` of a CRD document (as read from its YAML) and a version name."""
    return CrdVersion(crd, version)
