"""Module entrypoint for `launch(..., module=True)`: writes argv to OUT_DIR/<rank>.txt."""

import os
import sys

if __name__ == "__main__":
    with open(os.path.join(sys.argv[1], f"{os.environ['RANK']}.txt"), "w") as fh:
        fh.write(" ".join([__name__, *sys.argv[2:]]))
