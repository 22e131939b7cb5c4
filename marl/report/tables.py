"""Markdown tables: the one piece of formatting that every report section shares.

It lives apart from :mod:`marl.report.markdown` so that sections rendered elsewhere
(:mod:`marl.report.league`, ``marl.bench``'s baselines page, :mod:`marl.report.compare`)
use it without importing the report renderer, which imports them.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["table", "title_lines"]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table.

    Examples:
        >>> print(table(["a", "b"], [[1, 2]]))
        | a | b |
        |---|---|
        | 1 | 2 |
    """

    def cell(x: object) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def title_lines(title: str, command: str | None, version: str | None = None) -> list[str]:
    """The opening lines of a markdown page: its title, then the command that made it
    (and the marl version, when given), each followed by a blank line.

    Examples:
        >>> title_lines("Comparison", "marl-report --compare a b")
        ['# Comparison', '', 'Made by `marl-report --compare a b`.', '']
    """
    lines = [f"# {title}", ""]
    if command:
        made_by = f"Made by `{command}`" + (f" (marl {version})" if version else "")
        lines += [made_by + ".", ""]
    return lines
