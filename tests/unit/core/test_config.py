import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raytrain_helpers.core import config

REPO_ENV = Path(__file__).resolve().parents[3] / "env.yaml"


def load(**kw):
    return config.load(REPO_ENV, environ=kw.pop("environ", {}), **kw)


def test_env_yaml_loads_with_every_reference_variable(clean_env):
    s = load()
    flat = s.flat()
    for env_sh, name in config.ENV_SH_NAMES.items():
        assert name in flat, env_sh
    assert s.versions.kuberay_version == "1.7.0"
    assert s.versions.ray_version == "2.58.0"
    assert s.versions.nvidia_device_plugin_version == "0.20.0"
    assert s.versions.efa_device_plugin_version == "v0.5.30"
    assert s.kubernetes.namespace == "ray-train"
    assert s.target == "local"


def test_flat_names_are_unique_and_resolvable():
    assert len(config.FLAT_FIELDS) == len(set(config.FLAT_FIELDS))
    for flat, (group, leaf) in config.FLAT_FIELDS.items():
        assert config.resolve_key(flat) == (group, leaf)
        assert config.resolve_key(config.env_var_name(flat)) == (group, leaf)
        if group:
            assert config.resolve_key(f"{group}.{leaf}") == (group, leaf)


def test_precedence_defaults_file_override_env_param(tmp_path):
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"train": {"steps": 11, "seq_len": 64}, "gpu_node_count": 3}))
    s = load(files=[over])
    assert (s.train.steps, s.train.seq_len, s.aws.gpu_node_count) == (11, 64, 3)
    s = load(files=[over], environ={"RAYTRAIN_STEPS": "12", "RAYTRAIN_GPU_NODE_COUNT": "4"})
    assert (s.train.steps, s.aws.gpu_node_count, s.train.seq_len) == (12, 4, 64)
    s = load(files=[over], environ={"RAYTRAIN_STEPS": "12"}, steps=13)
    assert s.train.steps == 13
    src = config.sources(s)
    assert src["train.steps"].startswith("parameter")
    assert "over.yaml" in src["train.seq_len"]


def test_env_values_are_typed():
    s = load(environ={"RAYTRAIN_LEARNING_RATE": "3e-4", "RAYTRAIN_NUM_WORKERS": "2", "RAYTRAIN_K8S_VERSION": "1.32"})
    assert s.train.learning_rate == pytest.approx(3e-4)
    assert s.train.num_workers == 2
    assert s.aws.k8s_version == "1.32"


@pytest.mark.parametrize(
    "kw, field, fix",
    [
        (dict(steps=-1), "train.steps (STEPS)", "at least 1"),
        (dict(namespace="Ray_Train"), "kubernetes.namespace (NAMESPACE)", "ray-train"),
        (dict(ray_cluster_name="x" * 50), "kubernetes.ray_cluster_name (RAY_CLUSTER_NAME)", "at most 40"),
        (dict(model_preset="huge"), "train.model_preset", "tiny, qwen2.5-1.5b"),
        (dict(gpus_per_node=8), "gpus_per_node = 8", "set gpus_per_node: 4"),
        (dict(gpu_node_type="m7i.xlarge", gpus_per_node=1), "gpu_node_type", "one of"),
        (dict(region="mars-1"), "aws.region (REGION)", "us-west-2"),
        (dict(target="gcp"), "target", "'local' or 'aws'"),
        (
            dict(dlc_image="public.ecr.aws/deep-learning-containers/ray:latest"),
            "versions.dlc_image (DLC_IMAGE)",
            "explicit tag",
        ),
        (dict(capacity_reservation_id="reservation-1"), "capacity_reservation_id", "cr-"),
        (dict(bench_steps=2, bench_warmup_steps=2), "bench_warmup_steps", "smaller"),
        (dict(gpu_az="eu-west-1a"), "gpu_az", "not in region"),
        (dict(learning_rate=5), "train.learning_rate (LEARNING_RATE)", "between 0 and 1"),
        (dict(temp_root="/tmp/" + "x" * 60), "temp_root", "107 bytes"),
        (dict(model_id="/no/such/model-dir"), "train.model_id (MODEL_ID)", "neither an existing folder nor a model"),
    ],
)
def test_bad_values_name_the_field_and_the_fix(kw, field, fix):
    with pytest.raises(config.ConfigError) as e:
        load(**kw)
    msg = str(e.value)
    assert field in msg, msg
    assert fix in msg, msg


def test_the_local_cluster_needs_its_token_and_a_folder_of_the_users_own_by_default():
    """Token authentication is on and the temp root is per user, both in the code's defaults and in env.yaml."""
    from raytrain_helpers.core.settings import LocalSettings

    for loc in (LocalSettings(), load().local):
        assert loc.auth_mode == "token"
        assert loc.temp_root_path() == f"/tmp/raytrain-{os.geteuid()}"
    assert "auth_mode: disabled" not in REPO_ENV.read_text()


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "image, ok",
    [
        ("public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1", True),
        (f"public.ecr.aws/deep-learning-containers/ray@{DIGEST}", True),  # pinned by digest alone
        (f"public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1@{DIGEST}", True),  # tag and digest
        (f"registry.example:5000/ray:latest@{DIGEST}", True),  # the digest decides, whatever the tag says
        ("public.ecr.aws/deep-learning-containers/ray", False),  # neither
        ("public.ecr.aws/deep-learning-containers/ray@sha256:abc", False),  # not a sha256 digest
        (f"public.ecr.aws/deep-learning-containers/ray@{DIGEST.upper()}", False),
    ],
)
def test_images_may_be_pinned_by_digest(image, ok):
    if ok:
        assert load(dlc_image=image).versions.dlc_image == image
    else:
        with pytest.raises(config.ConfigError, match="or a digest"):
            load(dlc_image=image)


def test_ray_version_must_equal_installed():
    import ray

    assert config.installed_ray_version() == ray.__version__
    with pytest.raises(config.ConfigError) as e:
        load(ray_version="2.57.0")
    assert "RAY_VERSION" in str(e.value) and ray.__version__ in str(e.value)


def test_loading_the_settings_does_not_import_ray(repo_root):
    """Every kernel and command loads the settings; the version check reads Ray's metadata instead of importing it."""
    code = (
        "import sys, raytrain_helpers as rt; rt.load(sys.argv[1]); print(sorted({'ray', 'torch'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(repo_root / "env.yaml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_unknown_setting_in_yaml_and_param(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  stepz: 3\n")
    with pytest.raises(config.ConfigError, match="unknown setting train.stepz"):
        load(files=[bad])
    with pytest.raises(config.ConfigError, match="unknown setting 'stepz'"):
        load(stepz=3)


def test_settings_from_notebook_namespace():
    ns = {
        "target": None,
        "steps": 3,
        "run_name": "nb",
        "env_file": str(REPO_ENV),
        "unrelated": 1,
        "override_files": None,
    }
    s = config.settings_from(ns)
    assert s.train.steps == 3 and s.run_name == "nb" and s.target == "local"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["-p", "steps", "-1"], "train.steps (STEPS)"),
        (["-p", "gpus_per_node", "3"], "gpus_per_node = 3"),
        (["-p", "namespace", "UPPER"], "kubernetes.namespace"),
    ],
)
def test_cli_exits_non_zero_naming_the_field(args, needle):
    r = subprocess.run(
        [sys.executable, "-m", "raytrain_helpers.cli", "config", "--env-file", str(REPO_ENV), *args],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr


def test_bad_env_yaml_file_fails_with_field(tmp_path):
    bad = tmp_path / "env.yaml"
    bad.write_text(REPO_ENV.read_text().replace("gpu_node_count: 2", "gpu_node_count: 0"))
    r = subprocess.run(
        [sys.executable, "-m", "raytrain_helpers.cli", "config", "--env-file", str(bad)], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "aws.gpu_node_count (GPU_NODE_COUNT) = 0" in r.stderr and "env.yaml" in r.stderr


def _field_infos():
    """(dotted name, FieldInfo) of every field: the groups and every setting inside them."""
    yield from config.Settings.model_fields.items()
    for group, leaf in config.FLAT_FIELDS.values():
        if group:
            yield f"{group}.{leaf}", config.Settings.model_fields[group].annotation.model_fields[leaf]


def test_every_setting_has_a_description():
    missing = [name for name, info in _field_infos() if not (info.description or "").strip()]
    assert not missing, f"settings without a docstring (docs/settings.md's table is generated from them): {missing}"
    assert "-1 = split the visible GPUs" in config.LocalSettings.model_fields["gpus_per_worker_node"].description
    assert "0 = every GPU" in config.TrainSettings.model_fields["num_workers"].description


def test_field_docs_cover_every_setting_in_order():
    docs = config.field_docs()
    assert [d.flat for d in docs] == list(config.FLAT_FIELDS)
    defaults = config.Settings().flat()
    by_flat = {d.flat: d for d in docs}
    for d in docs:
        assert d.default == defaults[d.flat], d.flat
        assert d.description and "\n" not in d.description, d.flat
        assert d.env_sh == config.FLAT_TO_ENV_SH.get(d.flat, "")
    assert by_flat["steps"].dotted == "train.steps" and by_flat["steps"].env_sh == "STEPS"
    assert by_flat["target"].dotted == "target" and by_flat["target"].type == "local | aws"
    assert (by_flat["steps"].type, by_flat["learning_rate"].type) == ("int", "float")
    assert (by_flat["extra_pip"].type, by_flat["env"].type) == ("list[str]", "dict[str, str]")


@pytest.mark.parametrize(
    "text, value",
    [
        ("5", 5),
        ("3e-4", 3e-4),
        ("1.0e-4", 1e-4),
        ("true", True),
        ("abc", "abc"),
        ("[a", "[a"),
        ("[1, 2]", [1, 2]),
    ],
)
def test_coerce_scalar_reads_yaml_scalars(text, value):
    assert config.coerce_scalar(text) == value


def test_loaded_env_file_follows_overrides():
    s = load()
    assert config.loaded_env_file(s) == str(REPO_ENV)
    assert config.loaded_env_file(config.with_overrides(s, steps=3)) == str(REPO_ENV)
    assert config.loaded_env_file(config.Settings()) is None


def test_an_env_yaml_in_a_folder_others_may_write_is_never_read(tmp_path, monkeypatch):
    """/tmp is 1777: another user's /tmp/env.yaml must not choose this user's settings (nor a stray one a test
    run left there). The search stops below such a folder and falls back to the repository's env.yaml."""
    from raytrain_helpers.core import loading

    monkeypatch.delenv(loading.ENV_FILE_VAR, raising=False)
    open_ = tmp_path / "open"
    (open_ / "mine" / "notebooks").mkdir(parents=True)
    open_.chmod(0o1777)
    (open_ / "env.yaml").write_text("target: aws\n")
    found = loading.find_env_file(open_ / "mine" / "notebooks")
    assert found is None or found.parent == Path(loading.__file__).resolve().parents[1]  # the package's own, if any
    (open_ / "mine" / "env.yaml").write_text("target: local\n")
    assert loading.find_env_file(open_ / "mine" / "notebooks") == open_ / "mine" / "env.yaml"


def test_the_hf_secret_fix_keeps_the_token_out_of_history_and_the_process_list():
    with pytest.raises(config.ConfigError) as e:
        load(hf_token_secret="Bad_Name")
    msg = str(e.value)
    assert "--from-literal" not in msg and "--from-file=HF_TOKEN=/dev/stdin" in msg
    assert "read -rs " in msg and 'printf %s "$' in msg  # read without echo; printf is a shell builtin
