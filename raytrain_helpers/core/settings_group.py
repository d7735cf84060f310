"""The base of every settings group: unknown keys refused, assignments validated, a docstring per field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SettingsGroup(BaseModel):
    """One group of env.yaml (``aws:``, ``train:`` ...)."""

    # use_attribute_docstrings: the docstring under each field becomes its description (`config --names`,
    # `config --markdown` and docs/settings.md's settings table are generated from them).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)
