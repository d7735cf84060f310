"""raytrain-tutorial init DIR: writes env.yaml, the notebooks and a README; refuses a non-empty DIR without
--force; never overwrites a file the user changed."""

from __future__ import annotations

from raytrain_helpers.cli import main


def test_init_writes_refuses_and_keeps_edits(tmp_path, repo_root, capsys):
    work = tmp_path / "work"
    assert main(["init", str(work)]) == 0
    assert (work / "env.yaml").read_bytes() == (repo_root / "env.yaml").read_bytes()
    assert {p.name for p in (work / "notebooks").iterdir()} == {
        p.name for p in (repo_root / "notebooks").glob("*.ipynb")
    }
    assert "raytrain-tutorial run" in (work / "README.md").read_text()

    assert main(["init", str(work)]) == 2
    assert "is not empty" in capsys.readouterr().err

    (work / "env.yaml").write_text("target: aws\n")
    (work / "README.md").unlink()
    assert main(["init", str(work), "--force"]) == 0
    assert (work / "env.yaml").read_text() == "target: aws\n"
    assert (work / "env.yaml.new").read_bytes() == (repo_root / "env.yaml").read_bytes()
    assert (work / "README.md").is_file()
    out = capsys.readouterr().out
    assert "kept" in out and "env.yaml.new" in out


def test_init_under_a_file_creates_nothing(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["init", str(blocker / "work")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == [blocker]
