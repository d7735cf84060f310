"""``raytrain-tutorial report RUN``: one self-contained HTML page of an executed run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from raytrain_helpers.cli import main

REPO = Path(__file__).resolve().parents[3]


def test_report_joins_the_run_into_one_offline_page(tmp_path, capsys):
    run = tmp_path / "myrun"
    (run / "notebooks").mkdir(parents=True)
    notebooks = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))
    for nb in notebooks:
        shutil.copy(nb, run / "notebooks" / nb.name)
    (run / "job.json").write_text(json.dumps({"status": "SUCCEEDED", "submission_id": "raysubmit_abc"}))

    assert main(["report", str(run)]) == 0
    html = (run / "report.html").read_text()
    for nb in notebooks:
        assert f"From <code>{nb.name}</code>" in html
    assert "raysubmit_abc" in html and "SUCCEEDED" in html
    assert not re.findall(r'<script[^>]*src="https?://', html), "the page must not fetch scripts"
    committed_images = sum(json.dumps(json.loads(nb.read_text())).count("image/png") for nb in notebooks)
    assert html.count("data:image/png;base64") >= committed_images > 0, "plots are embedded"


def test_report_without_executed_notebooks_names_the_fix(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "raytrain-tutorial run" in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()
