"""`decoevo report`: one self-contained HTML file over run and sweep directories.

collect (discover, runs) -> compute (tables, plots) -> `Report` (model) -> HTML (render, templates/).
"""

from .discover import ReportInputError
from .model import Report, build_report
from .render import render, write

__all__ = ["Report", "ReportInputError", "build_report", "render", "write"]
