"""`mad-eval view`: run folders as a static site to read the debates in a browser (README:
Reading the debates in a browser)."""

from __future__ import annotations

from mad_eval.viewer.site import (
    ViewError,
    Written,
    build_site,
    default_out,
    load_view,
    make_server,
    site_files,
    write_site,
)

__all__ = [
    "ViewError",
    "Written",
    "build_site",
    "default_out",
    "load_view",
    "make_server",
    "site_files",
    "write_site",
]
