"""``python -m elastic_idl.conformance``: the reference conformance entry point.

Reads a contract request (JSON) on stdin and writes this implementation's
outputs (JSON) on stdout. The format is documented in ``contract/README.md``;
the implementation is `elastic_idl._conformance`.
"""

from __future__ import annotations

from elastic_idl._conformance import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
