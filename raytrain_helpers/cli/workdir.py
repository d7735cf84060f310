"""``raytrain-tutorial init DIR``: a working folder (env.yaml, the notebooks, a short README) for a user who
installed the package from a wheel, without the repository.

A non-empty DIR is refused unless ``--force``; even then a file the user changed is never overwritten: it is
kept, and the shipped version is written beside it as ``NAME.new``. A failed init removes what it created.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..core.paths import data_path

README = """# raytrain-tutorial working folder

Written by `raytrain-tutorial init`. Edit `env.yaml` (every setting: `raytrain-tutorial config --names`), then:

```bash
raytrain-tutorial config            # the resolved settings and where each came from
raytrain-tutorial run               # notebooks 01 -> 08 on the target of env.yaml; results in runs/
jupyter lab notebooks/              # or step through the notebooks yourself (start with 01_capacity)
```

The notebooks read `env.yaml` from this folder (or its parents); runs land in `runs/` beside it.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``init`` command."""
    p = sub.add_parser(
        "init",
        help="write a working folder: env.yaml, the notebooks and a short README (for a wheel install)",
    )
    p.add_argument("dir", metavar="DIR", help="the folder to write (created; must be empty unless --force)")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty DIR: add missing files; a file you changed is kept (shipped copy as NAME.new)",
    )
    p.set_defaults(func=init_command)


def shipped_files() -> dict[str, bytes]:
    """What a working folder holds: relative path -> contents."""
    files = {"env.yaml": data_path("env.yaml").read_bytes(), "README.md": README.encode()}
    for nb in sorted(data_path("notebooks").glob("[0-9][0-9]_*.ipynb")):
        files[f"notebooks/{nb.name}"] = nb.read_bytes()
    return files


def _blocker(target: Path) -> Path | None:
    """The first existing non-directory on the way to ``target`` (nothing can be created below it)."""
    for p in [*reversed(target.parents), target]:
        if p.exists() and not p.is_dir():
            return p
    return None


def plan_init(target: Path, files: dict[str, bytes], force: bool) -> dict[str, str]:
    """What init does with each file: ``write``, ``same`` (already identical) or ``keep`` (the user's differs).

    Raises ValueError (with the fix) when DIR cannot be used.
    """
    blocker = _blocker(target)
    if blocker is not None:
        raise ValueError(f"{blocker} is a file, so {target} cannot be a folder. Fix: choose another DIR")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise ValueError(
            f"{target} is not empty. Fix: choose a new or empty folder, or pass --force to add the missing files "
            f"(files you changed are kept)"
        )
    plan = {}
    for rel, data in files.items():
        path = target / rel
        if not path.exists():
            plan[rel] = "write"
        elif path.is_file() and path.read_bytes() == data:
            plan[rel] = "same"
        else:
            plan[rel] = "keep"
    return plan


def _write(target: Path, files: dict[str, bytes], plan: dict[str, str]) -> list[Path]:
    created: list[Path] = []
    for rel, action in plan.items():
        if action == "same":
            continue
        path = target / rel if action == "write" else (target / rel).with_name(Path(rel).name + ".new")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(files[rel])
        tmp.replace(path)
        created.append(path)
    return created


def init_command(args: argparse.Namespace) -> int:
    target = Path(args.dir).expanduser().resolve()
    try:
        files = shipped_files()
        plan = plan_init(target, files, args.force)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    existed = target.exists()
    try:
        target.mkdir(parents=True, exist_ok=True)
        created = _write(target, files, plan)
    except OSError as e:
        if not existed:
            shutil.rmtree(target, ignore_errors=True)
        print(
            f"error: cannot write {target}: {e.strerror or e}. Fix: choose a folder you can write to", file=sys.stderr
        )
        return 2
    for path in created:
        print(f"wrote {path}")
    for rel in (r for r, a in plan.items() if a == "keep"):
        print(f"kept {target / rel} (you changed it; the shipped version is {target / rel}.new)")
    print(f"\nnext: cd {target} && raytrain-tutorial config && raytrain-tutorial run   (or: jupyter lab notebooks/)")
    return 0
