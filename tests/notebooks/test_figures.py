"""Figures that appear in more than one place come from one source: each chapter's header quotes, for aws, the
minutes the walkthrough estimate allows it (``plan/walkthrough.py``, which its first cell prices), says how long it
takes to read, and every MFU or tokens/s figure of a measured run quoted in the notebooks, the README and the docs is
the one recorded in ``benchmarks/results/``. Pure: reads the text sources, the package and the JSON records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from raytrain_helpers.core import loading
from raytrain_helpers.plan import walkthrough
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay
from raytrain_helpers.targets.aws.storage import gate as storage_gate

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "notebooks" / "src"
NAMES = sorted(p.stem for p in SOURCES.glob("[0-9][0-9]_*.md"))
#: Words a learner reads per minute. Brysbaert (2019), "How many words do we read per minute? A review and
#: meta-analysis of reading rate", Journal of Memory and Language 109, 104047: silent reading of English non-fiction
#: averages 238 words a minute; these chapters are technical, with terms new to the reader, so 200.
READ_WPM = 200
#: Lines of code a learner reads per minute: the project's assumption (no published rate fits code read to be
#: understood), a line counted as about ten words read at the prose rate.
CODE_LPM = 20
#: How far a stated reading time may stray from the computed one.
READ_TOLERANCE = 0.20
#: The most words of prose the eight chapters may hold together (the rest belongs in docs/).
MAX_PROSE_WORDS = 12_000
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
WORD = re.compile(r"[A-Za-z0-9][\w'.-]*")


def header(name: str) -> str:
    text = (SOURCES / f"{name}.md").read_text()
    start = text.index("**Time**")
    return " ".join(text[start : text.index("**Cost on aws**", start)].split())


def body(name: str) -> str:
    return (SOURCES / f"{name}.md").read_text().split("---", 2)[-1]


def prose_words(name: str) -> int:
    """Words outside code: code cells and fenced blocks (an exercise's code, a shell command) are code."""
    return len(WORD.findall(FENCE.sub("", body(name))))


def code_lines(name: str) -> int:
    """Non-blank lines of code the learner reads: the code cells and fenced blocks, and the package source that
    ``show_source`` cells print (its lines as the package has them)."""
    import inspect

    from raytrain_helpers.present.source import resolve

    lines = sum(
        len([x for x in f.splitlines()[1:-1] if x.strip() and not x.startswith(":tags:")])
        for f in FENCE.findall(body(name))
    )
    for target in re.findall(r'show_source\("([^"]+)"\)', body(name)):
        source, _ = inspect.getsourcelines(inspect.unwrap(resolve(target)))
        lines += len([x for x in source if x.strip()])
    return lines


def reading_minutes(name: str) -> float:
    return prose_words(name) / READ_WPM + code_lines(name) / CODE_LPM


@pytest.fixture(scope="module")
def defaults():
    return loading.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws")


@pytest.mark.parametrize("name", NAMES)
def test_every_header_says_how_long_the_chapter_takes_to_read(name):
    """The **Time** line's "about N minutes to read" is the chapter's prose at READ_WPM plus its code at CODE_LPM,
    within READ_TOLERANCE."""
    m = re.search(r"about (\d+) minutes to read", header(name))
    assert m, f"{name}: the **Time** line says how long the chapter takes to read ('about N minutes to read')"
    expected = reading_minutes(name)
    assert abs(int(m.group(1)) - expected) <= READ_TOLERANCE * expected, (name, round(expected, 1), m.group(0))


def test_the_reading_time_counts_prose_and_code():
    assert prose_words("05_train") > 1000 and code_lines("05_train") > code_lines("08_teardown")
    assert reading_minutes("05_train") > prose_words("05_train") / READ_WPM  # its source listings count


def test_the_chapters_hold_at_most_twelve_thousand_words_of_prose():
    words = {name: prose_words(name) for name in NAMES}
    assert sum(words.values()) <= MAX_PROSE_WORDS, words


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("01")])
def test_the_aws_minutes_in_every_header_are_the_walkthrough_estimates(name, defaults):
    """The header's "on aws about N minutes" is the estimate's row for the chapter at the defaults, called an
    estimate; the chapter's first cell prices the same row for the learner's settings."""
    number = name[:2]
    text = header(name)
    m = re.search(r"on aws about (\d+) minutes", text)
    assert m and "estimated" in text, f"{name}: 'on aws about N minutes ..., estimated' in the **Time** line"
    assert int(m.group(1)) == round(walkthrough.chapter_minutes(defaults, number)), (name, m.group(0))
    source = (SOURCES / f"{name}.md").read_text()
    assert f'rt.describe(cfg, brief=True, notebook="{number}")' in source, name
    assert not re.search(r"\d+-\d+ minutes on aws|minutes on aws \(", text), f"{name}: a typed range, not the estimate"


def test_the_image_pull_allowance_is_what_02_and_04_say_and_what_the_code_waits_for(defaults):
    pull = walkthrough.IMAGE_PULL_MIN
    assert f"up to {pull:.0f} for the first pull" in header("02_cluster")
    assert f"up to {pull:.0f} for the first pull" in header("04_kuberay")
    assert storage_gate.START_TIMEOUT_S >= pull * 60, "02's storage check waits at least the pull allowance"
    import inspect

    wait = inspect.signature(kuberay.raycluster).parameters["timeout_s"].default
    assert wait >= pull * 60, "04 waits at least the pull allowance"
    by = {p.notebook: p for p in walkthrough.estimate(defaults).phases}
    assert by["04"].minutes >= pull and by["02"].minutes >= pull


def test_01_prices_its_api_calls_with_the_minutes_its_header_states():
    text = (SOURCES / "01_capacity.md").read_text()
    stated = re.search(r"on aws about (\d+) minutes of\s+read-only API calls", text)
    priced = re.search(r"cost_note\(cfg, minutes=(\d+), creates=False\)", text)
    assert stated and priced and stated.group(1) == priced.group(1)


def _records() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (REPO / "benchmarks" / "results").glob("*vs-yardstick.json")}


def _quoting_files() -> list[Path]:
    return [*sorted(SOURCES.glob("*.md")), REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_mfu_quoted_is_a_recorded_measurement():
    """An MFU percentage in the notebooks, the README or the docs is one of the measured runs' (rounded to 0.1),
    not a range from elsewhere; the H100 and H200 figures are both quoted in 05."""
    recorded = {f"{r['mfu'] * 100:.1f}" for r in _records().values()}
    assert {"53.8", "45.4"} <= recorded
    found = []
    for path in _quoting_files():
        for line in path.read_text().splitlines():
            for m in re.finditer(r"MFU[^|.\n]{0,40}?(\d+(?:\.\d+)?)\s?%|(\d+(?:\.\d+)?)\s?% MFU", line):
                found.append((path.name, m.group(1) or m.group(2)))
    assert found, "no MFU figure found: the pattern is stale"
    wrong = [(f, v) for f, v in found if v not in recorded and f"{float(v):.1f}" not in recorded]
    assert not wrong, f"MFU figures not in benchmarks/results/*vs-yardstick.json: {wrong}"
    five = (SOURCES / "05_train.md").read_text()
    assert "53.8 %" in five and "45.4 %" in five


def test_the_tokens_per_second_quoted_for_the_h200_run_is_the_record():
    rec = _records()["h200x1-vs-yardstick"]
    figure = f"{rec['tokens_per_s_per_gpu']:,.0f}"
    assert figure in (SOURCES / "07_benchmark.md").read_text()
    assert f"**{figure}**" in (REPO / "docs" / "performance.md").read_text()
