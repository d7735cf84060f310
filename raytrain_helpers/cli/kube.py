"""Transition: delegates to the old modules."""
from .. import kuberay, plugins, render


def register(sub):
    kuberay.register_cli(sub)
    plugins.register_cli(sub)
    render.register_cli(sub)
