"""What every notebook prints first: what the settings ask for, and where it runs."""

from __future__ import annotations

from ..core.settings import Settings
from ..plan import cost, walkthrough
from ..targets import for_settings
from . import progress


def describe(
    settings: Settings, *, brief: bool = False, minutes: float | None = None, notebook: str | None = None
) -> None:
    """A short summary of what the settings ask for (first cell of every notebook).

    ``brief``: two lines (target, run, where it runs; the aws stack's hourly cost) for the chapters after 01,
    which prints the full summary and the price table once; ``notebook`` ("02".."08"): the chapter whose minutes on
    aws the walkthrough estimate allows (:func:`.walkthrough.chapter_minutes`, for these settings), priced;
    ``minutes`` instead gives them directly.
    """
    progress.notebook_started(settings, notebook or "01")  # what a workshop's facilitator reads
    if notebook is not None:
        minutes = walkthrough.chapter_minutes(settings, notebook)
    t = settings.train
    target = for_settings(settings)
    report_billing_on_error(settings)
    line = f"target {target.NAME} | run {settings.run_name} | {target.where(settings)}"
    if brief:
        per_hour = cost.estimate(settings, settings.aws.region).total_per_hour
        share = f"; this chapter about {minutes:.0f} min, USD {per_hour * minutes / 60:.2f}" if minutes else ""
        print(line)
        print(f"on aws, estimated: the stack USD {per_hour:.2f}/h{share} (01 prints both tables)")
        return
    print(line)
    print(
        f"model {t.model_id or t.model_preset} | steps {t.steps} | seq_len {t.seq_len} | batch {t.batch_size}/worker"
        f" | workers {t.num_workers or 'all'}"
    )
    print(f"Ray {settings.versions.ray_version} | image {settings.versions.dlc_image}")


def report_billing_on_error(settings: Settings) -> None:
    """In a notebook: after any cell that raises, below its traceback, what of the tutorial still bills, its cost per
    hour and the command that stops it (:meth:`Target.billing`; nothing is printed when nothing bills). Outside
    IPython this does nothing; ``raytrain-tutorial run`` reports the same after a failed notebook."""
    shell = progress.ipython_shell()
    if shell is None:
        return

    def handler(shell, etype, value, tb, tb_offset=None):  # noqa: ANN001, ANN202 - IPython's CustomTB signature
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        try:
            still = for_settings(settings).billing(settings)
        except Exception as e:  # noqa: BLE001 - the listing must never hide the cell's own error
            print(f"\n(what still bills could not be read: {e}. Run `raytrain-tutorial status --target "
                  f"{for_settings(settings).NAME}` to see it)")  # fmt: skip
            return None
        if not still.ok:
            print()
            still.show()
        return None

    shell.set_custom_exc((Exception,), handler)
