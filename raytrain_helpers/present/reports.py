"""Tables beside a step's result: what a chapter costs on aws (:func:`cost_note`), 06's criteria
(:func:`criteria_view`, read back by :func:`criteria_rows`), the NCCL lines the audit quoted
(:func:`show_nccl_lines`).
"""

from __future__ import annotations

import html
import textwrap
from typing import Any

from ..core.criteria import FAIL, NA, PASS, Criteria
from ..core.settings import Settings
from ..core.tables import MAX_WIDTH, format_table, wrapped_table
from ..plan import cost
from .shown import Shown, fit, pre_html


def cost_note(settings: Settings, minutes: float, *, creates: bool = True) -> Shown:
    """What the aws stack costs per hour (the package's price table) and for ``minutes`` of this chapter.

    ``creates``: whether the stack exists while the chapter runs (False: the chapter creates nothing billed).
    """
    aws = settings.aws
    est = cost.estimate(settings, aws.region)
    rows = [*est.rows, ("total", "", "", f"{est.total_per_hour:.2f}")]
    table = format_table(rows, ["item", "qty", "USD/h each", "USD/h"], title=None)
    if creates:
        share = est.total_per_hour * minutes / 60
        lead = (
            f"On aws this chapter takes about {minutes:g} min of the stack below: about USD {share:.2f} "
            f"(USD {est.total_per_hour:.2f}/h)."
        )
    else:
        lead = (
            f"On aws this chapter creates nothing billed (about {minutes:g} min of API calls); the stack it "
            f"prepares costs USD {est.total_per_hour:.2f}/h while it exists."
        )
    notes = [f"prices: {aws.region}, list prices of {est.as_of}; " + "; ".join(est.notes)]
    notes.append("On the local target nothing is billed.")
    text = "\n".join([textwrap.fill(lead, MAX_WIDTH), table, *(textwrap.fill(n, MAX_WIDTH) for n in notes)])
    return Shown(text, pre_html(text))


#: Column widths of :func:`criteria_view` (result, criterion, evidence): 4 + 6 + 3 + 30 + 3 + 62 + 2 = 110.
#: Criterion names are fixed text; evidence carries measured figures, so it breaks at its "; " separators first
#: (a figure one digit longer must not move a line break: nbval compares the lines).
CRITERIA_WIDTHS = (6, 30, 62)
STATUS_COLOURS = {PASS: "#1a7f37", FAIL: "#cf222e", NA: "#6a737d"}
#: The HTML class of :func:`criteria_view`'s table in a notebook page (what a browser test looks for).
CRITERIA_CLASS = "raytrain-criteria"


def criteria_view(verification: Any, *, interactive: bool | None = None) -> Shown:
    """06's criteria as a table at most :data:`MAX_WIDTH` wide (long evidence wraps inside its cell), then the
    count; HTML: the same rows with the result coloured (green PASS, red FAIL, grey n/a)."""
    crit: Criteria = getattr(verification, "criteria", verification)
    rows = [(c.status, c.name, c.evidence) for c in crit.items]
    text_rows = [(status, name, evidence.replace("; ", ";\n")) for status, name, evidence in rows]
    n_pass = sum(c.status == PASS for c in crit.items)
    n_na = sum(c.status == NA for c in crit.items)
    summary = f"{n_pass} passed, {len(crit.failed)} failed, {n_na} not applicable"
    text = wrapped_table(text_rows, ["result", "criterion", "evidence"], CRITERIA_WIDTHS, title=crit.title)
    text += "\n" + summary
    cells = "".join(
        f'<tr><td style="color:{STATUS_COLOURS.get(s, "inherit")};font-weight:bold;text-align:left">{html.escape(s)}'
        f'</td><td style="text-align:left">{html.escape(n)}</td><td style="text-align:left">{html.escape(e)}</td></tr>'
        for s, n, e in rows
    )
    page = (
        f'<div class="{CRITERIA_CLASS}"><b>{html.escape(crit.title)}</b>'
        f'<table style="table-layout:fixed;width:100%;max-width:{MAX_WIDTH}ch;font-size:12px">'
        '<colgroup><col style="width:8%"><col style="width:34%"><col style="width:58%"></colgroup>'
        "<thead><tr><th style='text-align:left'>result</th><th style='text-align:left'>criterion</th>"
        f"<th style='text-align:left'>evidence</th></tr></thead><tbody>{cells}</tbody></table>"
        f"<p>{html.escape(summary)}</p></div>"
    )
    return Shown(text, page, interactive=interactive)


def criteria_rows(text: str) -> dict[str, tuple[str, str]]:
    """Read a :func:`criteria_view` table back: criterion -> (result, evidence), wrapped cells joined again."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(cells) != 3:
            continue
        if cells[0] in (PASS, FAIL, NA):
            rows.append(cells)
        elif not cells[0] and rows:
            rows[-1][1] = f"{rows[-1][1]} {cells[1]}".strip()
            rows[-1][2] = f"{rows[-1][2]} {cells[2]}".strip()
    return {name: (status, evidence) for status, name, evidence in rows}


def show_nccl_lines(audit: Any, limit: int = 12) -> Shown:
    """The NCCL log lines the transport audit quoted for its findings (None: no NCCL in this run)."""
    if audit is None:
        return Shown("no NCCL lines: the ranks ran on CPU and talk through gloo, which prints no transport lines")
    out = [f"NCCL transport audit: {'PASS' if audit.ok else 'FAIL'} ({audit.verdict}), expected {audit.expected}"]
    out += textwrap.wrap(audit.summary, MAX_WIDTH, initial_indent="  ", subsequent_indent="  ")
    shown = 0
    for finding in audit.findings:
        head = f"[{finding.severity.upper()}] {finding.code}: {finding.message}"
        out += textwrap.wrap(head, MAX_WIDTH, subsequent_indent="    ")
        for evidence in finding.evidence:
            if shown >= limit:
                break
            out.append(fit(f"    > {evidence.text}"))
            shown += 1
    text = "\n".join(out)
    return Shown(text, pre_html(text, lambda line: "#cf222e" if line.startswith("[FAIL]") else None))
