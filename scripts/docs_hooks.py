"""MkDocs hooks (mkdocs.yml, ``hooks:``): serve the pinned npm files from the site itself.

Before a build, scripts/docs_vendor.py provides the files requirements/docs-npm.txt pins (from the
npm cache, fetched once); they are added to the site under ``assets/vendor/``. Mermaid (3.5 MB) is
loaded only by the pages that hold a diagram: after a page is rendered, a ``<script>`` for it goes
in front of ``</body>`` when the page has a ``class="mermaid"`` block. Material then finds
``window.mermaid`` defined and loads nothing from a CDN; the other pages load nothing of it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

VENDOR_URL = "assets/vendor"
MERMAID = f"{VENDOR_URL}/mermaid.min.js"


def _vendor_module() -> ModuleType:
    path = Path(__file__).with_name("docs_vendor.py")
    spec = importlib.util.spec_from_file_location("docs_vendor", path)
    assert spec is not None and spec.loader is not None  # a file next to this one
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    vendor = _vendor_module()
    try:
        provided = vendor.provide()
    except vendor.VendorError as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"docs_hooks: {exc}") from exc
    for path in provided:
        files.append(File.generated(config, f"{VENDOR_URL}/{path.name}", abs_src_path=str(path)))
    return files


def on_post_page(output: str, page: Any, config: Any) -> str:
    """Load Mermaid on a page that draws a diagram, after Material's own scripts."""
    if 'class="mermaid"' not in output:
        return output
    from mkdocs.utils import get_relative_url

    src = get_relative_url(MERMAID, page.url)
    head, sep, tail = output.rpartition("</body>")
    return f'{head}<script src="{src}"></script>\n{sep}{tail}'
