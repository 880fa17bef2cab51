"""Make the checkout importable as the package the wheel installs (a development install).

The wheel merges three trees into one ``elastic_idl`` package: src/elastic_idl,
gen/pb2/elastic_idl (the _pb2 modules) and gen/betterproto/elastic_idl (as
``elastic_idl.betterproto``). No editable-install backend can map two sources onto
one package, so this builds that layout out of symlinks under build/devtree and
puts it first on the venv's sys.path with a .pth file. A sub-package of
src/elastic_idl (``_task``, ``_sdk``, ``_backend``, ``_launch``) is linked whole, so a
module added inside one shows up at once. Beside the tree goes a minimal
``elastic_idl-<version>.dist-info`` with the entry points of pyproject.toml, so
that importlib.metadata finds them as for an installed wheel (flytekit loads the
``flytekit.plugins`` group on import). Rerun after adding a top-level module or
sub-package to src/elastic_idl, or after changing the entry points.

Usage: python scripts/dev_install.py [--remove]
"""

from __future__ import annotations

import shutil
import site
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "devtree"
PTH_NAME = "elastic_idl_devtree.pth"


def build_tree() -> Path:
    pkg = TREE / "elastic_idl"
    if TREE.exists():
        shutil.rmtree(TREE)
    pkg.mkdir(parents=True)
    for entry in sorted((ROOT / "src" / "elastic_idl").iterdir()):
        # a module, or a sub-package linked as one directory (it holds no generated code)
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for entry in sorted((ROOT / "gen" / "pb2" / "elastic_idl").iterdir()):
        (pkg / entry.name).symlink_to(entry)
    (pkg / "betterproto").symlink_to(ROOT / "gen" / "betterproto" / "elastic_idl")
    write_dist_info(TREE)
    return TREE


def write_dist_info(tree: Path) -> Path:
    """METADATA and entry_points.txt of pyproject.toml, as the wheel's dist-info holds them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = tree / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    lines = []
    for group, entries in groups.items():
        lines += [f"[{group}]", *(f"{name} = {target}" for name, target in entries.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))
    return info


def main(argv: list[str]) -> int:
    target = Path(site.getsitepackages()[0]) / PTH_NAME
    if "--remove" in argv:
        target.unlink(missing_ok=True)
        print(f"removed {target}")
        return 0
    tree = build_tree()
    # An `import` line in a .pth runs at start-up: it puts the tree before
    # site-packages, so it wins over an installed wheel.
    target.write_text(f"import sys; sys.path.insert(0, {str(tree)!r})\n")
    print(f"dev tree {tree} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
