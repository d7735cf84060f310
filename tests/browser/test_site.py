"""The docs site in a learner's browser: built as ``tests/test_docs.py`` builds it (warnings as errors), then opened
in headless Chromium (Debian's, through Playwright) at 1,280 x 900 px. On notebook 05's page (the widest code) and
on 01's and 06's (the widest tables) no code cell, output or table scrolls sideways: each one's content fits the
width the theme gives it. A screenshot of 05 is kept beside the test's files for a person to look at.

Without Debian's ``chromium`` or Playwright for Python the test is skipped with the reason.
"""

from __future__ import annotations

import pytest

from tests.jupyterlab import CHROMIUM, missing
from tests.test_docs import DOCS_SITE

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group(DOCS_SITE)]

#: What a learner reads as a block: highlighted code (input cells and listings), plain-text outputs, tables.
BLOCKS = "article div.highlight pre, article div.cell_output pre, article div.output pre, article table"

#: For each block on the page, the element that would scroll (the block, or its nearest scrolling ancestor inside
#: the article) and by how many pixels its content overflows it; blocks that fit are left out.
OVERFLOW = """(selector) => {
  const out = [];
  for (const el of document.querySelectorAll(selector)) {
    let box = el;
    for (let p = el.parentElement; p && p.tagName !== 'ARTICLE'; p = p.parentElement) {
      const s = getComputedStyle(p).overflowX;
      if (s === 'auto' || s === 'scroll') { box = p; break; }
    }
    const over = box.scrollWidth - box.clientWidth;
    if (over > 1) out.push({tag: el.tagName, over, text: (el.innerText || '').slice(0, 60)});
  }
  return out;
}"""


@pytest.fixture(scope="module")
def site(built_site):
    if missing():
        pytest.skip(missing())
    r, out = built_site
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def overflowing(site, page_path: str, shot=None) -> tuple[int, list[dict]]:
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((site / page_path).as_uri(), wait_until="load")
            blocks = page.locator(BLOCKS).count()
            found = page.evaluate(OVERFLOW, BLOCKS)
            if shot is not None:
                page.screenshot(path=str(shot), full_page=False)
        finally:
            browser.close()
    return blocks, found


@pytest.mark.parametrize("name", ["05_train", "01_capacity", "06_verify"])
def test_no_code_cell_or_table_scrolls_sideways_at_1280_px(site, name, tmp_path):
    shot = tmp_path / f"{name}-1280.png"
    blocks, found = overflowing(site, f"notebooks/{name}.html", shot)
    assert blocks >= 5, f"{name}: {blocks} code blocks or tables found: the selector no longer matches the theme"
    assert not found, f"{name} at 1280 px: blocks that scroll sideways (screenshot {shot}): {found}"
    assert shot.stat().st_size > 10_000


def test_the_check_fails_on_a_page_too_narrow_for_its_code(site, tmp_path):
    """The same check on the same page in a 700-px window finds blocks that scroll: it can fail."""
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page(viewport={"width": 700, "height": 900})
            page.goto((site / "notebooks/05_train.html").as_uri(), wait_until="load")
            found = page.evaluate(OVERFLOW, BLOCKS)
        finally:
            browser.close()
    assert found, "a 700-px window should make some code scroll"


#: Each picture of the page: whether the browser decoded it, and its size as drawn and as decoded.
PICTURES = """() => Array.from(document.querySelectorAll('article img')).map(
  img => ({src: img.getAttribute('src'), complete: img.complete, natural: img.naturalWidth, shown: img.clientWidth}))"""


def test_the_pictures_drawn_from_a_local_run_are_rendered(site):
    """docs/what-runs-where.md shows one FSDP step and the cluster, drawn by the package from a real local run:
    each is decoded (naturalWidth > 0) and drawn on the page with a width."""
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((site / "docs/what-runs-where.html").as_uri(), wait_until="load")
            imgs = page.evaluate(PICTURES)
        finally:
            browser.close()
    shown = {i["src"].rsplit("/", 1)[-1]: i for i in imgs}
    for name in ("fsdp_step_local.png", "cluster_local.png"):
        assert name in shown, f"{name} is not on the page: {imgs}"
        assert shown[name]["complete"] and shown[name]["natural"] > 0 and shown[name]["shown"] > 200, shown[name]
