"""Transition shim (removed when the redesign is complete): the templating lives at ``plan.render``, the
manifests of the aws target at ``plan.manifests``."""

from .core.paths import manifests_dir  # noqa: F401
from .plan.manifests import ALTERNATIVES, render_all, write_all  # noqa: F401
from .plan.render import context, render_objects, render_template, to_yaml  # noqa: F401
