"""02 and 08 · The documents the aws path creates, and the commands that would do the same by hand.

:func:`write` renders every document into ``runs/<run_name>/rendered`` (what ``raytrain-tutorial render --out``
writes): the Kubernetes objects, the eksctl configs, the storage role's trust and permission policies and the Pod
Identity association; :func:`show` prints the storage part of them; :func:`equivalents` prints the ``eksctl`` /
``aws s3api`` / ``aws iam`` / ``aws eks`` / ``kubectl`` commands of step 02 (or, with ``teardown``, of step 08),
pointing at those files. On the local target they show what the aws path would create with these settings.
"""

from __future__ import annotations

from pathlib import Path

from ..core.loading import with_overrides
from ..core.paths import run_dir
from ..core.settings import Settings
from ..plan.manifests import PLACEHOLDERS, write_all
from ..targets import show_aws_equivalents

#: The folder under the run's folder.
FOLDER = "rendered"
#: The documents :func:`show` prints (the storage and its identity; the others are shown by 02-04 already).
SHOWN = ("iam/storage-role-trust-policy.json", "iam/storage-role-permission-policy.json")


def _aws(settings: Settings) -> Settings:
    return with_overrides(settings, target="aws")


def folder(settings: Settings) -> Path:
    return run_dir(settings) / FOLDER


def write(settings: Settings, account: str | None = None) -> list[Path]:
    """Render every document of the aws path into :func:`folder`; ``account``: the account id (a placeholder
    when None)."""
    return write_all(_aws(settings), folder(settings), account=account or PLACEHOLDERS["account"])


def show(settings: Settings, account: str | None = None) -> list[Path]:
    """:func:`write`, then list the files and print the storage role's policies and its association."""
    paths = write(settings, account)
    out = folder(settings)
    print(f"{len(paths)} documents in {out}:")
    for p in paths:
        print(f"  {p.relative_to(out)}")
    for name in (*SHOWN, "eks/pod-identity-association.json"):
        if (out / name).is_file():
            print(f"--- {name}\n{(out / name).read_text().rstrip()}")
    return paths


def equivalents(settings: Settings, *, teardown: bool = False, account: str | None = None) -> None:
    """The commands that create (``teardown``: remove) what the aws path creates, with the files of :func:`write`."""
    show_aws_equivalents(
        _aws(settings),
        docs=str(folder(settings)),
        account=account or PLACEHOLDERS["account"],
        teardown=teardown,
    )


__all__ = ["FOLDER", "equivalents", "folder", "show", "write"]
