"""The preflight's row for the Ray Train image: pinned by digest, or the digest its tag points to now.

No published source gives the digest of ``public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1`` (the
aws/deep-learning-containers changelog and ``available_images.md`` name tags only; docs/pins.md), so the default
stays the tag and this row asks the registry (:func:`..clients.registry.manifest_digest`, anonymous) and prints
``REPO:TAG@sha256:...`` to pin it with. A failed lookup only warns: the nodes pull the tag either way.
"""

from __future__ import annotations

from collections.abc import Callable

from ...clients import registry
from ...core.settings import Settings
from ..base import Requirement

WHAT = "Ray Train image (versions.dlc_image)"


def image_row(settings: Settings, resolve: Callable[[str], str] = registry.manifest_digest) -> Requirement:
    """``ok`` with the digest it is pinned to; else ``unknown`` with the digest the tag points to now (or why that
    could not be read) and the line that pins it."""
    image = settings.versions.dlc_image
    if "@sha256:" in image:
        return Requirement(WHAT, f"pinned: {image.split('@', 1)[1]}", "a digest", "ok", required=False)
    try:
        digest = resolve(image)
    except registry.RegistryError as e:
        return Requirement(WHAT, f"tag only; digest not read ({e})", "a digest", "unknown",
                           "check the network, or pin it yourself: `crane digest IMAGE`", required=False)  # fmt: skip
    return Requirement(
        WHAT,
        f"tag only; it points to {digest} now",
        "a digest",
        "unknown",
        f"pin it: `dlc_image: {image}@{digest}` under versions: in env.yaml",
        required=False,
    )


__all__ = ["WHAT", "image_row"]
