"""What every notebook prints first: what the settings ask for, and where it runs."""

from __future__ import annotations

from ..core.settings import Settings
from ..targets import for_settings


def describe(settings: Settings) -> None:
    """A short summary of what the settings ask for (first cell of every notebook)."""
    t = settings.train
    target = for_settings(settings)
    print(f"target {target.NAME} | run {settings.run_name} | {target.where(settings)}")
    print(
        f"model {t.model_id or t.model_preset} | steps {t.steps} | seq_len {t.seq_len} | batch {t.batch_size}/worker"
        f" | workers {t.num_workers or 'all'}"
    )
    print(f"Ray {settings.versions.ray_version} | image {settings.versions.dlc_image}")
