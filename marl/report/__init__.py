"""Benchmark reports: aggregate runs' ``results.json`` with sound statistics.

- :mod:`marl.report.results`: the ``results.json`` format (marl-eval's), the
  :class:`RunResults` writer and :func:`load_results`.
- :mod:`marl.report.stats`: normalization, IQM / median / mean / optimality
  gap with stratified-bootstrap CIs, performance profiles, probability of
  improvement, Student-t intervals.
- :mod:`marl.report.report`, :mod:`marl.report.markdown`,
  :mod:`marl.report.plots`, :mod:`marl.report.compare`: the report itself.
- :mod:`marl.report.references`: reference scores and the verdict of a set of
  runs against them (``marl-report --check``).
- :mod:`marl.report.baselines`: ``baselines.json``, the random and no-op
  policy's scores that ``marl-bench`` writes next to a suite's runs.
- :mod:`marl.report.league`: ``elo.json``, a league's Elo ratings (``marl.league``
  writes them), ranked in a section of the report.
- :mod:`marl.report.plan`: ``plan.json``, the runs a benchmark meant to make (so a
  report names exactly the missing ones).
- :mod:`marl.report.cli`: the ``marl-report`` command (``python -m marl.report``).

Importing this package loads numpy only; matplotlib is imported when a figure
is drawn.
"""

from marl.report.baselines import (
    BASELINES_FILENAME,
    BaselineEntry,
    load_baselines,
    write_baselines,
)
from marl.report.compare import Comparison, compare_results, render_comparison
from marl.report.league import ELO_FILENAME, LeagueTable, find_leagues, load_league
from marl.report.markdown import render_markdown
from marl.report.plan import PLAN_FILENAME, load_plan, write_plan
from marl.report.references import (
    REFERENCES_FILENAME,
    Reference,
    ReferenceCheck,
    ReferenceFormatError,
    check_references,
    load_references,
    parse_references,
    write_references,
)
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
    "BASELINES_FILENAME",
    "ELO_FILENAME",
    "PLAN_FILENAME",
    "REFERENCES_FILENAME",
    "RESULTS_FILENAME",
    "BaselineEntry",
    "Comparison",
    "Evaluation",
    "LeagueTable",
    "Reference",
    "ReferenceCheck",
    "ReferenceFormatError",
    "Report",
    "ReportConfig",
    "ResultsFormatError",
    "ResultsTable",
    "RunKey",
    "RunResults",
    "build_report",
    "check_references",
    "compare_results",
    "find_leagues",
    "find_results_files",
    "load_baselines",
    "load_league",
    "load_plan",
    "load_references",
    "load_results",
    "parse_references",
    "render_comparison",
    "render_markdown",
    "write_baselines",
    "write_plan",
    "write_references",
]
