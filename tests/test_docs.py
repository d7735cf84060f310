"""The docs: the site (``docs/`` and the executed notebooks) builds with warnings as errors, so a broken internal
link, a page missing from the table of contents or a wrong heading anchor fails here; the README stays a page a
newcomer finishes, and every relative link in it and in ``docs/`` leads to a file that exists."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: [text](target) where target is not a URL: a path in the repository, maybe with a #fragment.
LINK = re.compile(r"\[[^\]]*\]\((?!https?://|mailto:|#)([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
#: The site is built once a run (tests/conftest.py ``built_site``): this file checks the build, the browser test
#: (tests/browser/test_site.py) reads the same pages, both on one xdist worker (``--dist loadgroup``).
DOCS_SITE = "docs-site"


def sphinx(src: Path, conf: Path, out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-c", str(conf), str(src)]
    return subprocess.run([*cmd, str(out)], capture_output=True, text=True, timeout=600)


def relative_links(md: Path) -> list[tuple[str, Path]]:
    text = FENCE.sub("", md.read_text())
    return [(t, (md.parent / t.split("#", 1)[0]).resolve()) for t in LINK.findall(text) if t.split("#", 1)[0]]


@pytest.mark.slow
@pytest.mark.xdist_group(DOCS_SITE)
def test_the_site_builds_without_a_warning(built_site):
    r, tmp_path = built_site
    assert r.returncode == 0, r.stderr[-4000:]
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    notebooks = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) == 8
    assert {f"notebooks/{nb}.html" for nb in notebooks} <= pages
    assert {"docs/index.html", "docs/aws.html", "docs/architecture.html", "docs/pins.html"} <= pages
    assert (tmp_path / "index.html").read_text().count("docs/index.html") >= 1, "the site's root leads to docs/"


def test_a_broken_internal_link_fails_the_build(tmp_path):
    """The same configuration on two small pages: a link to a page that does not exist is an error."""
    src = tmp_path / "src"
    (src / "docs").mkdir(parents=True)
    shutil.copy(REPO / "docs" / "conf.py", src / "docs" / "conf.py")
    (src / "docs" / "_static").mkdir()
    for name in ("_root",):
        if (REPO / "docs" / name).is_dir():
            shutil.copytree(REPO / "docs" / name, src / "docs" / name)
    (src / "docs" / "index.md").write_text("# Home\n\n```{toctree}\npage\n```\n")
    (src / "docs" / "page.md").write_text("# Page\n\nSee [home](index.md).\n")
    assert sphinx(src, src / "docs", tmp_path / "ok").returncode == 0
    (src / "docs" / "page.md").write_text("# Page\n\nSee [a page that is gone](gone.md).\n")
    r = sphinx(src, src / "docs", tmp_path / "broken")
    assert r.returncode != 0
    assert "gone.md" in r.stderr


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines; move detail to docs/"
    commands = [i for i, line in enumerate(lines) if line.startswith("python3 -m venv .venv && ")]
    assert len(commands) == 2, "exactly two set-up commands"
    assert commands[-1] < 30, f"the second command is on line {commands[-1] + 1}; both belong in the first 30"
    ci = (REPO / ".ci" / "run").read_text()
    assert lines[commands[1]] in ci, ".ci/run runs the README's test command verbatim"


@pytest.mark.parametrize("md", [README, *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_lead_to_files(md):
    missing = [t for t, path in relative_links(md) if not path.exists()]
    assert not missing, f"{md.relative_to(REPO)} links to files that do not exist: {missing}"


def test_the_walkthrough_cost_quoted_in_the_docs_is_the_commands_output():
    """docs/aws.md pastes ``raytrain-tutorial cost --target aws``, equal to what plan.walkthrough computes at the
    defaults, and the README's "Run the source article" quotes the first line of ``raytrain-tutorial cost -f
    profiles/aws-article.yaml`` (both on a day when Kubernetes 1.35 is in standard support)."""
    import datetime as dt

    from raytrain_helpers.core import loading
    from raytrain_helpers.plan import walkthrough

    s = loading.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws")
    est = walkthrough.estimate(s, today=dt.date(2026, 12, 4))
    assert est.text() in (REPO / "docs" / "aws.md").read_text(), "paste `raytrain-tutorial cost --target aws`"
    readme = README.read_text()
    aws = readme[readme.index("## Run it on AWS") : readme.index("## Where to go next")]
    assert "-f profiles/aws-article.yaml" in aws
    # "Run the source article" quotes what `cost -f profiles/aws-article.yaml` prints for that profile
    article = loading.load(
        REPO / "env.yaml",
        files=[REPO / "profiles" / "aws-article.yaml"],
        environ={},
        check_installed_ray=False,
        storage_path="",
    )
    line = walkthrough.estimate(article, today=dt.date(2026, 12, 4)).line()
    assert line in aws, f"the README's cost under 'Run the source article' must read: {line}"
    assert line != est.line()
