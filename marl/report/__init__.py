"""Benchmark reports: aggregate runs' ``results.json`` with sound statistics.

- :mod:`marl.report.results`: the ``results.json`` format (marl-eval's), the
  :class:`RunResults` writer and :func:`load_results`.
- :mod:`marl.report.stats`: normalization, IQM / median / mean / optimality
  gap with stratified-bootstrap CIs, performance profiles, probability of
  improvement, Student-t intervals.
- :mod:`marl.report.report`, :mod:`marl.report.markdown`,
  :mod:`marl.report.plots`, :mod:`marl.report.compare`: the report itself.
- :mod:`marl.report.cli`: the ``marl-report`` command (``python -m marl.report``).

Importing this package loads numpy only; matplotlib is imported when a figure
is drawn.
"""

from marl.report.compare import Comparison, compare_results, render_comparison
from marl.report.markdown import render_markdown
from marl.report.report import Report, ReportConfig, build_report
from marl.report.results import (
    RESULTS_FILENAME,
    Evaluation,
    ResultsFormatError,
    ResultsTable,
    RunKey,
    RunResults,
    find_results_files,
    load_results,
)

__all__ = [
    "RESULTS_FILENAME",
    "Comparison",
    "Evaluation",
    "Report",
    "ReportConfig",
    "ResultsFormatError",
    "ResultsTable",
    "RunKey",
    "RunResults",
    "build_report",
    "compare_results",
    "find_results_files",
    "load_results",
    "render_comparison",
    "render_markdown",
]
