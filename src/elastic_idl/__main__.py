"""``python -m elastic_idl``: the ``elastic-idl`` command line (same as ``python -m elastic_idl.cli``)."""

import sys

from elastic_idl.cli import main

if __name__ == "__main__":
    sys.exit(main())
