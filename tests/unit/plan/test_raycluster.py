"""plan.raycluster: what differs between the wanted and the live spec (the rendering: test_manifests.py)."""

from __future__ import annotations

from raytrain_helpers.plan import raycluster


def test_spec_diff_ignores_server_defaults_and_names_changes():
    want = {"a": 1, "b": {"c": "2"}, "l": [{"x": 1}]}
    assert raycluster.spec_diff(want, {"a": 1, "b": {"c": 2, "default": True}, "l": [{"x": 1, "y": 0}]}) == []
    assert raycluster.spec_diff(want, {"a": 2, "b": None, "l": []}) == ["spec.a", "spec.b", "spec.l"]
    assert raycluster.spec_diff(want, {"a": 1, "b": {"c": "2"}, "l": [{"x": 3}]}) == ["spec.l[0].x"]
