"""What the notebooks display beside each step: plain text that fits 110 columns and depends only on the settings
and the code; HTML only for a widget front end, always with the same content as its text/plain."""

from __future__ import annotations

import html
import inspect
import re
import time
from pathlib import Path

import pytest
import yaml

from raytrain_helpers import present
from raytrain_helpers.core import config
from raytrain_helpers.core.criteria import Criteria
from raytrain_helpers.plan import cost, raycluster
from raytrain_helpers.present import shown as shown_module
from raytrain_helpers.worker import train as worker_train

BORDER = re.compile(r"^[+|\-]+$")


@pytest.fixture
def settings(clean_env, repo_root):
    return config.load(repo_root / "env.yaml", environ={})


@pytest.fixture(autouse=True)
def no_forced_frontend(monkeypatch):
    monkeypatch.setattr(shown_module, "FORCE_INTERACTIVE", None)


def html_text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def html_words(page: str) -> list[str]:
    return words(html.unescape(re.sub(r"<[^>]+>", " ", page)))


def words(text: str) -> list[str]:
    """The words of a rendering, table borders and padding left out (wrapping may move them between lines)."""
    return [w for w in text.split() if not BORDER.match(w)]


def a_verification() -> Criteria:
    """The criteria 06 printed at 158 characters wide (long names and evidence), plus a failure."""
    crit = Criteria("verification of run 'tutorial' on target 'local'")
    crit.add("GPUs allocatable on every GPU node", None, na_reason="n/a on local (no Kubernetes device plugins)")
    crit.add("workers spread over >= 2 worker nodes, none on the head", True, "2 ranks on 2 worker node(s)")
    crit.add(
        "measured memory vs the plan",
        True,
        "sharded state 1.2 MiB/rank vs plan 1.2 MiB; process peak RSS 585.8 MiB (CPU: info only)",
    )
    crit.add(
        "NCCL transport as expected (efa) for every rank pair",
        False,
        "4 inter-node pair(s) ride NET/Socket - TCP sockets instead of the fabric: the silent fallback "
        "(NCCL_NET is set by environment: for a deliberate TCP baseline audit with expect='socket')",
    )
    return crit


def test_criteria_view_fits_110_columns_and_keeps_every_word():
    crit = a_verification()
    shown = present.criteria_view(crit, interactive=True)
    lines = shown.text.splitlines()
    assert max(len(line) for line in lines) <= present.MAX_WIDTH
    assert lines[-1] == "2 passed, 1 failed, 1 not applicable"
    bundle = shown._repr_mimebundle_()
    assert bundle["text/plain"] == shown.text
    # identical content: the same words in the text table and in the HTML table (wrapping interleaves the
    # columns' lines in the text, so compare them as multisets), and each cell whole in the HTML
    assert sorted(html_words(bundle["text/html"])) == sorted(words(shown.text))
    for item in crit.items:
        assert f">{html.escape(item.evidence)}</td>" in bundle["text/html"]
    assert 'color:#cf222e;font-weight:bold;text-align:left">FAIL' in bundle["text/html"]


def test_criteria_rows_reads_the_wrapped_table_back():
    crit = a_verification()
    crit.add("head Ready + workers Running", True, "head Ready, workers Running 2/2")
    rows = present.criteria_rows(present.criteria_view(crit).text)
    assert rows == {c.name: (c.status, c.evidence) for c in crit.items}


def test_no_html_without_a_widget_front_end():
    shown = present.criteria_view(a_verification())
    assert present.interactive_frontend() is False  # no IPython kernel in a test process
    assert set(shown._repr_mimebundle_()) == {"text/plain"}
    assert "text/html" in shown.mimebundle()


def test_wrapped_table_wraps_instead_of_cutting():
    text = present.wrapped_table([("a", "word " * 30)], ["k", "v"], (5, 20))
    assert max(map(len, text.splitlines())) == len("| k     | " + "v".ljust(20) + " |")
    assert words(text).count("word") == 30


#: The values of the settings below that each step's commands must carry.
MY_VALUES = dict(
    region="eu-west-1",
    cluster_name="my-eks",
    namespace="team-a",
    ray_cluster_name="rc1",
    kuberay_version="1.3.2",
    service_account="team-a-sa",
)
EXPECTED = {
    "capacity": ["eu-west-1"],
    "cluster": ["eu-west-1", "my-eks"],
    "plugins": ["role=gpu-worker"],
    # the RayCluster's pods run as the ServiceAccount: applied with it, or the pods are refused
    "kuberay": ["team-a", "rc1", "1.3.2", "-namespace-team-a.yaml", "-serviceaccount-team-a-sa.yaml"],
    "train": ["team-a", "svc/rc1-head-svc"],
    "verify": ["team-a", "ray.io/cluster=rc1"],
    "benchmark": ["team-a", "NCCL_NET"],
    "teardown": ["eu-west-1", "my-eks", "team-a", "rc1"],
}


@pytest.mark.parametrize("step", list(present.STEP_COMMANDS))
def test_equivalent_commands_fit_and_carry_the_settings_values(step, settings):
    mine = config.with_overrides(settings, **MY_VALUES)
    shown = present.equivalent_commands(step, mine)
    assert shown.text.startswith("# Optional:")
    assert max(len(line) for line in shown.text.splitlines()) <= present.MAX_WIDTH
    assert html_text(shown.mimebundle()["text/html"]) == shown.text
    joined = " ".join(command for _, command in shown.commands)
    for value in EXPECTED[step]:
        assert value in joined, (step, value)
    assert "us-west-2" not in joined and "ray-train" not in joined  # no default left behind
    # every command is in the text, split only between words
    for _, command in shown.commands:
        assert " ".join(command.split()) in " ".join(shown.text.replace(" \\\n", " ").split())


def test_equivalent_commands_reject_an_unknown_step(settings):
    with pytest.raises(ValueError, match="one of capacity, cluster"):
        present.equivalent_commands("deploy", settings)


def test_the_local_job_address_is_the_settings_dashboard_port(settings):
    mine = config.with_overrides(settings, dashboard_port=8399)
    commands = dict(present.equivalent_commands("train", mine).commands)
    assert any("--address http://127.0.0.1:8399" in c for c in commands.values())
    assert any("port-forward svc/raytrain-head-svc 8265:8265" in c for c in commands.values())
    token = (
        "RAY_AUTH_TOKEN=\"$(kubectl -n ray-train get secret raytrain -o jsonpath='{.data.auth_token}' | base64 -d)\""
    )
    assert any(token in c for c in commands.values())


def test_show_source_numbers_lines_as_in_the_file():
    func = worker_train.train_loop_per_worker
    shown = present.show_source(func)
    path = Path(inspect.getsourcefile(func))
    file_lines = path.read_text().splitlines()
    body = shown.text.splitlines()[1:]
    assert body, shown.text
    for line in body:
        number, code = int(line[:4]), line[6:]
        expected = file_lines[number - 1]
        assert code == expected or (code.endswith("...") and expected.startswith(code[:-3]))
    assert present.show_source("raytrain_helpers.worker.train:train_loop_per_worker").text == shown.text


def test_show_source_quotes_only_the_lines_asked_and_says_what_is_missing():
    shown = present.show_source(worker_train, ["ray.train.report(", "no_such_call("])
    quoted = shown.text.splitlines()[1:-1]
    assert quoted and all("ray.train.report(" in line for line in quoted)
    assert "not in this version" in shown.text and "no_such_call(" in shown.text


def test_key_lines_find_code_not_docstrings(tmp_path, monkeypatch):
    shown = present.key_lines([("report", "ray.train.report("), ("nothing", "no_such_call(")])
    lines = shown.text.splitlines()
    hits = [line for line in lines if not line.startswith(("#", " "))]
    assert hits and all(re.match(r"^\w+\.py:\d+: ", line) for line in hits)
    assert "(no line contains 'no_such_call(' in this version)" in shown.text
    module = tmp_path / "sample.py"
    module.write_text('"""Docstring that mentions fully_shard(x).\n\nmore fully_shard(y)\n"""\n\nfully_shard(model)\n')
    assert present.code_lines(module) == [(6, "fully_shard(model)")]


def test_show_manifest_is_the_rendered_object(settings):
    shown = present.show_manifest("raycluster", settings, full=True)
    doc = yaml.safe_load(shown.text)
    assert doc == raycluster.render_raycluster(settings)
    assert html_text(shown.mimebundle()["text/html"]) == shown.text


def test_abridge_shortens_long_plain_lists():
    short = present.abridge({"a": {"values": [f"t{i}" for i in range(303)]}, "b": [1, 2]})
    assert len(short["a"]["values"]) == present.LIST_LIMIT - 1 and short["b"] == [1, 2]
    assert re.match(r"\.\.\. \d+ more \(not shown\)", short["a"]["values"][-1])


def test_show_manifest_of_a_helm_release_is_its_values_under_the_install_command(settings):
    text = present.show_manifest("efa-device-plugin", settings).text
    assert (
        "# helm upgrade --install raytrain-aws-efa-k8s-device-plugin aws-efa-k8s-device-plugin "
        "--repo https://aws.github.io/eks-charts --version v0.5.30 --namespace kube-system -f THIS_FILE"
    ) in text
    assert yaml.safe_load(text)["nodeSelector"] == {"role": "gpu-worker"}
    assert "nodeSelector:\n  role: system" in present.show_manifest("kuberay-operator", settings).text


def test_show_manifest_renders_eksctl_with_placeholders(settings):
    text = present.show_manifest("eksctl-gpu-nodegroup", settings).text
    assert "efaEnabled: true" in text and "<private subnet of the cluster in us-west-2a>" in text
    with pytest.raises(ValueError, match="unknown manifest 'pods'"):
        present.show_manifest("pods", settings)


def test_cost_note_follows_the_settings(settings):
    two = present.cost_note(settings, minutes=30).text
    four = present.cost_note(config.with_overrides(settings, gpu_node_count=4), minutes=30).text
    total = cost.estimate(settings, settings.aws.region).total_per_hour
    assert f"USD {total * 0.5:.2f} (USD {total:.2f}/h)" in two
    assert "| GPU node g6.12xlarge   | 4" in four and four != two
    assert max(len(line) for line in four.splitlines()) <= present.MAX_WIDTH
    assert "creates nothing billed" in present.cost_note(settings, minutes=5, creates=False).text


def test_show_nccl_lines_quotes_the_audit_evidence(repo_root):
    from raytrain_helpers import nccl

    log = (repo_root / "tests" / "fixtures" / "nccl" / "synthetic-socket-2x4-baseline.log").read_text()
    shown = present.show_nccl_lines(nccl.audit(log, expect="efa"), limit=3)
    assert shown.text.startswith("NCCL transport audit: FAIL (fallback), expected efa")
    assert sum(line.startswith("    > ") for line in shown.text.splitlines()) == 3
    assert "via NET/Socket/0" in shown.text
    assert max(len(line) for line in shown.text.splitlines()) <= present.MAX_WIDTH
    assert "gloo" in present.show_nccl_lines(None).text


def test_quiet_view_shows_nothing(capsys):
    view = present.live_view(total=3)
    assert isinstance(view, present.QuietView) and not view.enabled
    view.update(dict(step=1, loss=6.9, step_time_s=0.05, tokens_per_s=5000.0))
    view.close()
    assert capsys.readouterr() == ("", "")
    assert view.history == [dict(step=1, loss=6.9, step_time_s=0.05, tokens_per_s=5000.0)]


def test_live_view_draws_loss_eval_loss_and_the_step_figures():
    view = present.live_view(interactive=True)
    assert isinstance(view, present.LiveView) and view.enabled
    view.update(dict(step=1, steps=3, loss=6.93, step_time_s=0.05, tokens_per_s=5120.0))
    view.update(dict(step=2, steps=3, loss=6.90, step_time_s=0.04, tokens_per_s=6400.0, eval_loss=6.95))
    view.update(dict(step=3, steps=3, loss=6.80, step_time_s=0.04, tokens_per_s=6400.0))
    solid = re.search(r'stroke="#1f77b4"[^>]*points="([^"]+)"', view.plot.value).group(1)
    dashed = re.search(r'stroke-dasharray="4" points="([^"]+)"', view.plot.value).group(1)
    assert len(solid.split()) == 3 and len(dashed.split()) == 1
    assert view.figures.value == "step 3/3: loss 6.8000 | 0.040 s/step | 6,400 tokens/s"
    assert (view.bar.n, view.bar.total) == (3, 3)
    view.close()


def test_live_view_rate_counts_from_the_first_step_not_from_the_submission():
    """The job spends tens of seconds starting before its first step: the bar's s/step must not include them."""
    view = present.live_view(total=8, interactive=True)
    view.bar.start_t -= 40.0  # as if Ray had spent 40 s starting the job's processes since the view was drawn
    created = view.bar.start_t + 40.0
    view.update(dict(step=1, steps=8, loss=6.9))
    view.update(dict(step=2, steps=8, loss=6.8))
    assert view.bar.n == 2 and view.bar.start_t >= created, "the start-up time was counted in the rate"
    view.close()


def test_settings_table_without_front_end(settings, tmp_path):
    shown = present.settings_form(tmp_path / "mine.yaml", settings)
    assert isinstance(shown, present.Shown)
    rows = [line for line in shown.text.splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[1].strip() for row in rows] == list(present.FORM_FIELDS)
    assert "env.yaml (target_defaults.local.train.steps)" in shown.text and "none yet" in shown.text
    assert max(len(line) for line in shown.text.splitlines()) <= present.MAX_WIDTH
    assert "override file my-settings.yaml" in present.settings_form(None, settings).text
    shown = present.settings_form([str(tmp_path / "a.yaml")], settings).text.replace("\n", " ")
    assert f"override file {tmp_path / 'a.yaml'}" in shown or str(tmp_path / "a.yaml") in shown.replace(" ", "")


def test_overrides_are_validated_by_the_settings_loader(settings, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env_file = str(Path(config.loaded_env_file(settings)))
    path = tmp_path / "mine.yaml"
    problems = present.save_overrides(path, {"steps": 0}, env_file)
    assert problems and "train.steps" in problems[0] and "Fix" in problems[0] and "mine.yaml" in problems[0]
    assert not path.exists()
    assert present.save_overrides(path, {"steps": 12, "region": "eu-west-1"}, env_file) == []
    loaded = config.load(env_file, files=[path], environ={})
    assert (loaded.train.steps, loaded.aws.region) == (12, "eu-west-1")
    assert present.read_overrides(path) == {"steps": 12, "region": "eu-west-1"}


def test_settings_form_shows_errors_beside_their_field(settings, tmp_path):
    path = tmp_path / "mine.yaml"
    form = present.SettingsForm(path, settings)
    form.inputs["steps"].value = 0
    assert form.save()
    assert "train.steps" in form.errors["steps"].value and form.errors["region"].value == ""
    assert not path.exists() and "not saved" in form.status.value
    form.inputs["steps"].value = 12
    assert form.save() == []
    assert present.read_overrides(path) == {"steps": 12}
    assert form.errors["steps"].value == "" and "override_files" in form.status.value


def _run_in_kernel(code: str, metadatas: list[dict]) -> list[str]:
    """Execute ``code`` once per execute-request metadata in one real IPython kernel; each run's stdout."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    try:
        return [_execute(client, code, metadata) for metadata in metadatas]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _execute(client, code: str, metadata: dict) -> str:
    msg = client.session.msg("execute_request", dict(code=code, silent=False), metadata=metadata)
    client.shell_channel.send(msg)
    out, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline:
        reply = client.get_iopub_msg(timeout=60)
        if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        if reply["msg_type"] == "stream":
            out += reply["content"]["text"]
        if reply["msg_type"] == "error":
            raise AssertionError("\n".join(reply["content"]["traceback"]))
        if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
            return out
    raise AssertionError("the kernel did not answer")


def test_frontend_detection_in_a_real_kernel():
    """papermill / nbclient / nbval send no execute metadata; JupyterLab sends cellId, deletedCells, recordTiming."""
    code = (
        "from raytrain_helpers.steps.display import interactive_frontend as f, live_view\n"
        "print(f(), type(live_view()).__name__)"
    )
    jupyterlab = {"cellId": "c1", "deletedCells": [], "recordTiming": False, "tags": []}
    headless, lab, headless_again = _run_in_kernel(code, [{}, jupyterlab, {}])
    assert headless.split() == ["False", "QuietView"] == headless_again.split()
    assert lab.split() == ["True", "LiveView"]


def _sanitize(text: str, repo_root: Path) -> str:
    """nbval's sanitizers of tests/notebooks/sanitize.cfg, applied in order."""
    cfg = (repo_root / "tests" / "notebooks" / "sanitize.cfg").read_text()
    pairs = re.findall(r"^regex: (.*)\nreplace: ?(.*)$", cfg, flags=re.M)
    for pattern, replacement in pairs:
        text = re.sub(pattern, replacement.strip('"'), text)
    return text


def test_criteria_lines_break_at_the_same_place_whatever_the_figures(repo_root):
    """Measured figures change length from run to run; nbval compares lines after its sanitizers, so a longer
    figure must not move a line break of the criteria table."""

    def table(state: str, rss: str, total: str, per_rank: str) -> str:
        crit = Criteria("verification of run 'tutorial' on target 'local'")
        crit.add(
            "measured memory vs the plan",
            True,
            f"sharded state {state} MiB/rank vs plan {state} MiB; process peak RSS {rss} MiB (CPU: info only)",
        )
        crit.add("throughput reported by every rank", True, f"{total} tokens/s total, {per_rank} tokens/s per rank")
        return present.criteria_view(crit).text

    one, other = table("1.2", "585.8", "3007", "1504"), table("1023.7", "11585.8", "13007", "6503")
    assert one != other
    assert _sanitize(one, repo_root) == _sanitize(other, repo_root)


def test_show_manifest_keeps_the_fields_asked_and_folds_the_rest(settings):
    keep = ["rayVersion", "spec.headGroupSpec.rayStartParams"]
    shown = present.show_manifest("raycluster", settings, keep=keep)
    doc = yaml.safe_load(shown.text)
    assert doc["kind"] == "RayCluster" and list(doc["spec"]) == ["rayVersion", "headGroupSpec"]
    assert list(doc["spec"]["headGroupSpec"]) == ["rayStartParams"]
    full = present.show_manifest("raycluster", settings)
    assert "containers" in full.text and "containers" not in shown.text
    assert "manifests/05-raycluster-raytrain.yaml" in shown.text
    assert max(len(line) for line in shown.text.splitlines()) <= present.MAX_WIDTH
    page = shown.mimebundle()["text/html"]
    assert "<details>" in page and html.escape("containers") in page.split("<details>")[1]
    with pytest.raises(ValueError, match="keep= needs a Kubernetes manifest"):
        present.show_manifest("eksctl-cluster", settings, keep=keep)
