"""The opt-in metrics stack: nothing without the setting; with it, values whose every key the charts document, KubeRay's
monitors kept to this RayCluster, Ray's own dashboards, and how to open them."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from raytrain_helpers.core import config
from raytrain_helpers.plan import manifests, metrics_stack
from tests.schemas import SCHEMAS

#: What each chart documents as its values (schemas/README.md says where each file comes from).
DOCUMENTED = {
    "kube-prometheus-stack": SCHEMAS / "kuberay" / "v1.7.0" / "prometheus-overrides.yaml",
    "dcgm-exporter": SCHEMAS / "dcgm-exporter" / f"v{metrics_stack.DCGM_CHART['version']}" / "values.yaml",
}


@pytest.fixture
def settings(clean_env, repo_root):
    return config.load(repo_root / "env.yaml", environ={}, target="aws", check_installed_ray=False)


def undocumented(values: dict[str, Any], documented: dict[str, Any], path: str = "") -> list[str]:
    """Every key path of ``values`` the chart's values file lacks (below a key the chart documents as a map of its
    own, e.g. ``nodeSelector: {}``, any key is the user's)."""
    missing = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in documented:
            missing.append(where)
        elif isinstance(value, dict) and isinstance(documented[key], dict) and documented[key]:
            missing += undocumented(value, documented[key], where)
    return missing


def test_off_by_default_nothing_is_rendered(settings):
    assert settings.aws.metrics_stack is False
    assert manifests.metrics_documents(settings) == []
    assert not [name for name, _ in manifests.aws_documents(settings) if name.startswith("metrics/")]


def test_every_value_is_one_the_chart_documents_at_the_pinned_version(settings):
    on = config.with_overrides(settings, metrics_stack=True)
    releases = {r["chart"]: r for r in metrics_stack.releases(on)}
    assert releases["kube-prometheus-stack"]["version"] == "48.2.1" and releases["dcgm-exporter"]["version"] == "4.8.2"
    for chart, path in DOCUMENTED.items():
        assert undocumented(releases[chart]["values"], yaml.safe_load(path.read_text())) == [], chart
    assert undocumented(
        {"grafana": {"sidecar": {"dashboard": {}}}}, yaml.safe_load(DOCUMENTED["kube-prometheus-stack"].read_text())
    ) == ["grafana.sidecar.dashboard"], "the check finds a misspelt key"


def test_the_monitors_and_dashboards_reach_this_cluster_and_the_release(settings):
    on = config.with_overrides(settings, metrics_stack=True, namespace="team-a", ray_cluster_name="rc")
    mons = metrics_stack.pod_monitors(on)
    release = metrics_stack.PROMETHEUS_CHART["release"]
    assert {m["metadata"]["labels"]["release"] for m in mons} == {release}, "Prometheus selects by this label"
    for m in mons:
        assert m["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}
        assert m["spec"]["selector"]["matchLabels"]["ray.io/cluster"] == "rc"
        assert [e["port"] for e in m["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert metrics_stack.dcgm_values(on)["serviceMonitor"]["additionalLabels"] == {"release": release}
    boards = metrics_stack.dashboards()
    assert [b["metadata"]["labels"] for b in boards] == [metrics_stack.DASHBOARD_LABEL] * 2
    text = next(iter(boards[1]["data"].values()))
    assert "ray_train" in text or "Train" in text, "the Train dashboard Ray generates"


def test_render_writes_the_stack_and_how_to_open_it(settings, tmp_path):
    on = config.with_overrides(settings, metrics_stack=True)
    paths = manifests.write_all(on, tmp_path)
    names = sorted(str(p.relative_to(tmp_path)) for p in paths if "metrics" in p.parts)
    assert "metrics/helm/prometheus.values.yaml" in names and "metrics/helm/dcgm-exporter.values.yaml" in names
    assert any(n.startswith("metrics/01-podmonitor-") for n in names) and "metrics/OPEN.sh" in names
    head = (tmp_path / "metrics/helm/prometheus.values.yaml").read_text().splitlines()[0]
    assert "--version 48.2.1" in head and "--namespace prometheus-system --create-namespace" in head
    assert "port-forward svc/prometheus-grafana 3000:80" in (tmp_path / "metrics/OPEN.sh").read_text()
