"""Before anything on the aws path: what it needs on the learner's machine, one row each, checked.

``raytrain-tutorial check --target aws`` and the first cells of notebook 01 print :func:`preflight`'s table; the
billable steps (02's ``cluster up``, 01's reservation probe) run it first and refuse to start when a required row
failed (:func:`require`). Each row says the version found, the version needed, and the fix:

* **AWS CLI** v2 >= 2.12.3: the kubeconfig ``eksctl utils write-kubeconfig`` writes calls ``aws eks get-token``
  for every Kubernetes request (the tutorial's Python client runs it too). Minimum: the EKS user guide's
  ``auto-cli-v2-version`` (awsdocs/amazon-eks-user-guide ``latest/ug/attributes.txt`` @ 0e0c7e00). AWS CLI v1 is
  refused with the v2 install as its fix: it entered maintenance mode on 2026-07-15 (AWS Developer Tools Blog, "AWS
  CLI v1 maintenance mode: announcing changes to dependency updates") and is what ``pip install awscli`` gives, so
  a v1 first on PATH is usually a Python environment's; v2 is not on PyPI (its installer:
  https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html). Not needed when
  ``aws-iam-authenticator`` is on PATH: eksctl looks that up *first* and writes a kubeconfig calling it instead
  (eksctl-io/eksctl ``pkg/utils/kubeconfig/kubeconfig.go``, ``authenticatorCommands()`` = [aws-iam-authenticator,
  aws] and ``lookupAuthenticator``, @ 99984adb, v0.230.0-5; checked 2026-12-04). The version is read the way eksctl
  reads it: ``aws --version`` and the regex ``aws-cli/([\\d.]*)`` (same file, ``getAWSCLIVersion``).
* **eksctl** :data:`~raytrain_helpers.core.constants.EKSCTL_MIN_VERSION` (termination-protected stacks) to
  :data:`~raytrain_helpers.core.constants.EKSCTL_MODELLED_VERSION` (the release the tests model); ``eksctl version``
  prints ``GetVersion()``: ``0.230.0``, or ``0.231.0-dev+<commit>.<date>`` for a snapshot (``pkg/ctl/misc/
  version.go``, ``pkg/version/version.go``).
* **helm** 3 to :data:`HELM_MODELLED` (the release the tests' fake helm models; newer is refused until checked),
  required: it is the one way steps 03 and 04 install the device plugins and the KubeRay operator (the publishers'
  charts at the pinned versions, docs/pins.md). ``helm version --short`` prints ``v4.2.4+g3900f43`` (helm/helm
  v4.2.4 ``pkg/cmd/version.go`` ``formatVersion``; helm 3's ``cmd/helm/version.go`` prints the same form).
* **kubectl** within one minor version of the cluster (``aws.k8s_version``; EKS user guide ``install-kubectl``:
  "within one minor version difference of your Amazon EKS cluster control plane"), optional: the tutorial talks to
  the API itself; only the commands it shows you use kubectl. ``kubectl version --client -o json``.
* **credentials**: the account and identity in use (``sts:GetCallerIdentity``).
* **Kubernetes version** (``aws.k8s_version``) at most :data:`~raytrain_helpers.core.constants.K8S_MODELLED_VERSION`
  (what the tests' stand-in for the cluster's API models), as EKS offers it in ``aws.region``, with credentials: EKS's
  ``DescribeClusterVersions`` (``clusterVersions``: ``versionStatus`` ``STANDARD_SUPPORT`` / ``EXTENDED_SUPPORT`` /
  ``UNSUPPORTED``, ``endOfStandardSupportDate``, ``endOfExtendedSupportDate``; botocore's eks service model), the
  same answer eksctl checks the version against (``pkg/eks/versions_manager.go``, :data:`~raytrain_helpers.core.
  constants.EKSCTL_RELEASES`). A version EKS does not offer, or no longer supports, stops the billable steps;
  extended support (the control plane at the extended price) is shown, with the version to move to, and does not.
  The hand-kept calendar of :mod:`raytrain_helpers.core.eks_versions` only prices the offline cost estimate.
* **vCPU quota** of the GPU node group's class (and the system node group's) in ``aws.region``: the applied
  quota, else the AWS default (Service Quotas, the codes of :data:`.quotas.QUOTA_CLASSES`), against the
  node groups' vCPUs. The limit, not what is free now: step 01 ranks AZs by what is free; this row answers
  "can this account ever run these node groups here", so it stays true while the tutorial's own nodes run.
* **Helm charts** (with credentials, once helm is usable): each chart of :mod:`raytrain_helpers.plan.charts`
  resolved at its pinned version in its repository (``helm show chart CHART --repo URL --version V``), one row
  each, so a version the repository does not publish stops 02 before anything bills, not 03 after.
* **IAM permissions**: which actions of the learner policy (:mod:`raytrain_helpers.plan.learner_policy`,
  ``docs/iam/learner-policy.json``) this identity cannot perform, from ``iam:SimulatePrincipalPolicy`` (no side
  effects); "could not check" when that is denied or the caller is not a role or user. It never blocks.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from ...clients import aws as aws_client
from ...clients import helm as helm_client
from ...clients import registry
from ...clients.kubernetes import K8sError
from ...core.constants import EKSCTL_MIN_VERSION, EKSCTL_MODELLED_VERSION, K8S_MODELLED_VERSION
from ...core.settings import Settings
from ...core.validation import ConfigError
from ...plan import charts, iam, learner_policy
from ..base import PreflightResult, Requirement
from . import cluster_check
from .placement.quotas import QUOTA_CLASSES, QuotaState, quota_class, quota_limit
from .placement.region_scan import InstanceFacts, instance_facts

AWS_CLI_V2_MIN = "2.12.3"
#: The newest helm accepted: the release tests/fakes/helm.py models (helm/helm tag v4.2.4, commit 3900f434).
HELM_MODELLED = "4.2.4"
#: ``--labels`` on ``helm upgrade --install`` (how a release is marked as the tutorial's) came in helm v3.13.0
#: (helm/helm v3.13.0 cmd/helm/upgrade.go; helm 4 keeps it: v4.2.4 pkg/cmd/upgrade.go).
HELM_MIN = "3.13.0"
#: eksctl writes the v1beta1 exec API for aws-iam-authenticator from this version on (kubeconfig.go).
AUTHENTICATOR_MIN = "0.5.3"
#: Seconds one ``--version`` may take (AWS CLI v1 starts Python: about a second).
TOOL_TIMEOUT_S = 30

AWS_CLI_FIX = (
    "install AWS CLI v2: https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html "
    "(Linux x86_64: curl -sSLo awscliv2.zip https://awscli.amazonaws.com/awscli-exe-linux-x86_64.zip && "
    "unzip -q awscliv2.zip && sudo ./aws/install --update)"
)
#: AWS CLI v1 first on PATH: v2 is not on PyPI, so ``pip install awscli`` always gives v1.
AWS_CLI_V1_FIX = (
    "AWS CLI v1 is in maintenance mode and the tutorial's commands are written for v2; {path} is v1 (what `pip "
    "install awscli` installs: `pip uninstall awscli` there). Then " + AWS_CLI_FIX
)
EKSCTL_FIX = (
    "install eksctl {max} (the newest release the tutorial is tested against; {min} or later works): "
    "https://eksctl.io/installation/ with the release's own download (Linux x86_64: curl -sSLO https://github.com/"
    "eksctl-io/eksctl/releases/download/v{max}/eksctl_Linux_amd64.tar.gz && tar -xzf eksctl_Linux_amd64.tar.gz -C "
    "/tmp && sudo install -m 0755 /tmp/eksctl /usr/local/bin/eksctl; macOS: eksctl_Darwin_arm64.tar.gz of the same "
    "release)"
)
HELM_FIX = (
    "install helm 3.13 to 4.2.4 (4.2.4 is the newest release the tutorial is tested against): https://helm.sh/docs/"
    "intro/install/ with that release's binary (https://github.com/helm/helm/releases/tag/v4.2.4); steps 03 and 04 "
    "install the device plugins and the KubeRay operator with it"
)
KUBECTL_FIX = (
    "install kubectl {minor}: https://kubernetes.io/docs/tasks/tools/ (or the EKS build: "
    "https://docs.aws.amazon.com/eks/latest/userguide/install-kubectl.html)"
)

_SEMVER = re.compile(r"(\d+)\.(\d+)\.(\d+)")


# --------------------------------------------------------------------------------------------------------------
# Reading versions from the tools' own output
# --------------------------------------------------------------------------------------------------------------


def version_tuple(text: str) -> tuple[int, int, int]:
    """``"0.205.0"`` -> (0, 205, 0); the first X.Y.Z in the text (ValueError when there is none)."""
    m = _SEMVER.search(text or "")
    if not m:
        raise ValueError(f"no version in {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def parse_aws_cli(output: str) -> str | None:
    """``aws --version``: ``aws-cli/2.22.35 Python/3.12.6 Linux/6.8.0 exe/x86_64.ubuntu.24`` -> ``2.22.35``."""
    m = re.search(r"aws-cli/(\d+\.\d+\.\d+)", output or "")
    return m.group(1) if m else None


def parse_eksctl(output: str) -> str | None:
    """``eksctl version``: ``0.230.0`` or ``0.231.0-dev+99984adb.2026-08-21T17:14:27Z`` -> ``0.230.0``."""
    m = re.match(r"\s*v?(\d+\.\d+\.\d+)", output or "")
    return m.group(1) if m else None


def parse_helm(output: str) -> str | None:
    """``helm version --short``: ``v3.16.3+gcfd0749`` -> ``3.16.3``."""
    m = re.match(r"\s*v?(\d+\.\d+\.\d+)", output or "")
    return m.group(1) if m else None


def parse_kubectl(output: str) -> str | None:
    """``kubectl version --client -o json``: ``clientVersion.gitVersion`` (``v1.32.4-eks-...``) -> ``1.32.4``;
    the plain ``Client Version: v1.32.4`` of older clients too."""
    try:
        git_version = json.loads(output)["clientVersion"]["gitVersion"]
    except (ValueError, KeyError, TypeError):
        git_version = output or ""
    m = _SEMVER.search(git_version)
    return ".".join(m.groups()) if m else None


def parse_authenticator(output: str) -> str | None:
    """``aws-iam-authenticator version``: ``{"Version":"0.5.5","Commit":"85e5..."}`` -> ``0.5.5``."""
    try:
        text = str(json.loads(output).get("Version", ""))
    except (ValueError, AttributeError):
        text = output or ""
    m = _SEMVER.search(text)
    return ".".join(m.groups()) if m else None


def tool_version(argv: Sequence[str], parse: Callable[[str], str | None]) -> tuple[str | None, str | None, str]:
    """(path on PATH or None, the version or None, what the tool said) for ``argv`` (e.g. ``aws --version``).

    stdout and stderr both: AWS CLI v1 on an old Python printed its version on stderr."""
    path = shutil.which(argv[0])
    if path is None:
        return None, None, ""
    try:
        proc = subprocess.run([path, *argv[1:]], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return path, None, str(e)
    said = (proc.stdout or "") + (proc.stderr or "")
    return path, parse(said), " ".join(said.split())[:120]


# --------------------------------------------------------------------------------------------------------------
# The rows
# --------------------------------------------------------------------------------------------------------------


def _unreadable(what: str, path: str, said: str, needed: str, fix: str, required: bool = True) -> Requirement:
    return Requirement(what, f"{path}: no version in {said!r}", needed, "unknown", fix, required)


def authenticator_row() -> tuple[Requirement | None, bool]:
    """The ``aws-iam-authenticator`` row when one is on PATH (eksctl's kubeconfig then calls it), and whether
    the kubeconfig will call the AWS CLI instead."""
    path, version, said = tool_version(["aws-iam-authenticator", "version"], parse_authenticator)
    if path is None:
        return None, True
    what, needed = "aws-iam-authenticator", f">= {AUTHENTICATOR_MIN} (on PATH: eksctl's kubeconfig calls it)"
    fix = "upgrade it (https://github.com/kubernetes-sigs/aws-iam-authenticator/releases) or remove it from PATH"
    if version is None:
        return _unreadable(what, path, said, needed, fix), False
    ok = version_tuple(version) >= version_tuple(AUTHENTICATOR_MIN)
    return Requirement(what, version, needed, "ok" if ok else "TOO OLD", "" if ok else fix), False


def aws_cli_row(*, token_command: bool = True) -> Requirement:
    """The AWS CLI: required when the kubeconfig calls ``aws eks get-token`` (no aws-iam-authenticator)."""
    needed = f"v2 >= {AWS_CLI_V2_MIN}"
    what = "AWS CLI (aws)"
    path, version, said = tool_version(["aws", "--version"], parse_aws_cli)
    if path is None:
        return Requirement(what, "not on PATH", needed, "MISSING", AWS_CLI_FIX, token_command)
    if version is None:
        return _unreadable(what, path, said, needed, AWS_CLI_FIX, token_command)
    if version_tuple(version)[0] < 2:
        return Requirement(what, version, needed, "TOO OLD", AWS_CLI_V1_FIX.format(path=path), token_command)
    ok = version_tuple(version) >= version_tuple(AWS_CLI_V2_MIN)
    return Requirement(what, version, needed, "ok" if ok else "TOO OLD", "" if ok else AWS_CLI_FIX, token_command)


def eksctl_row() -> Requirement:
    """eksctl from :data:`EKSCTL_MIN_VERSION` to :data:`EKSCTL_MODELLED_VERSION` (the release the tests model: a
    newer one is refused, "TOO NEW", until the tests are checked against it)."""
    lo, hi = EKSCTL_MIN_VERSION, EKSCTL_MODELLED_VERSION
    needed, fix = f"{lo} to {hi}", EKSCTL_FIX.format(min=lo, max=hi)
    path, version, said = tool_version(["eksctl", "version"], parse_eksctl)
    if path is None:
        return Requirement("eksctl", "not on PATH", needed, "MISSING", fix)
    if version is None:
        return _unreadable("eksctl", path, said, needed, fix)
    found = version_tuple(version)
    status = "TOO OLD" if found < version_tuple(lo) else "TOO NEW" if found > version_tuple(hi) else "ok"
    return Requirement("eksctl", version, needed, status, "" if status == "ok" else fix)


def helm_row() -> Requirement:
    needed = f"{HELM_MIN} to {HELM_MODELLED}"
    path, version, said = tool_version(["helm", "version", "--short"], parse_helm)
    if path is None:
        return Requirement("helm", "not on PATH", needed, "MISSING", HELM_FIX)
    if version is None:
        return _unreadable("helm", path, said, needed, HELM_FIX)
    found = version_tuple(version)
    status = (
        "TOO OLD" if found < version_tuple(HELM_MIN) else "TOO NEW" if found > version_tuple(HELM_MODELLED) else "ok"
    )
    return Requirement("helm", version, needed, status, "" if status == "ok" else HELM_FIX)


def chart_rows(settings: Settings) -> list[Requirement]:
    """One row per Helm chart the aws path installs (plan.charts): helm resolves it at its pinned version in its
    repository (``helm show chart CHART --repo URL --version V``), before anything bills."""
    rows = []
    for pin in charts.CHARTS:
        version = pin.version(settings)
        what, needed = f"Helm chart {pin.chart}", f"{version} in {pin.repo}"
        fix = (
            f"set versions.{pin.version_field} to a version {pin.repo} publishes (`helm search repo` after "
            f"`helm repo add`; docs/pins.md), and versions.{pin.digest_field} to its digest; or check the network"
        )
        try:
            meta = helm_client.show_chart(pin.chart, pin.repo, version)
        except (K8sError, OSError, subprocess.SubprocessError) as e:
            rows.append(Requirement(what, f"not resolved: {str(e)[-300:]}", needed, "FAILED", fix))
            continue
        if meta.get("name") != pin.chart or str(meta.get("version")) != version:
            found = f"helm resolved {meta.get('name')} {meta.get('version')}"
            rows.append(Requirement(what, found, needed, "FAILED", fix))
            continue
        pinned = f"sha256 {pin.digest(settings)[:12]}... pinned" if pin.digest(settings) else "digest from the index"
        rows.append(Requirement(what, f"{version} resolved ({pinned})", needed, "ok"))
    return rows


def kubectl_row(k8s_version: str) -> Requirement:
    """kubectl within one minor version of the cluster's Kubernetes (``aws.k8s_version``)."""
    major, minor = (int(x) for x in k8s_version.split(".")[:2])
    needed = f"{major}.{minor - 1} to {major}.{minor + 1} (cluster {k8s_version})"
    fix = KUBECTL_FIX.format(minor=f"{major}.{minor}")
    path, version, said = tool_version(["kubectl", "version", "--client", "-o", "json"], parse_kubectl)
    if path is None:
        return Requirement("kubectl", "not on PATH", needed, "MISSING", fix, required=False)
    if version is None:
        return _unreadable("kubectl", path, said, needed, fix, required=False)
    found = version_tuple(version)
    ok = found[0] == major and abs(found[1] - minor) <= 1
    return Requirement("kubectl", version, needed, "ok" if ok else "TOO FAR", "" if ok else fix, required=False)


def credentials_row(settings: Settings) -> tuple[Requirement, Any]:
    """(the row, a boto3 session or None): the account and identity in use, from ``sts:GetCallerIdentity``."""
    region = settings.aws.region
    sess = aws_client.session(region)
    try:
        ident = aws_client.identity(sess, region)
    except aws_client.AwsError as e:
        found, _, fix = str(e).partition(". Fix: ")
        return Requirement("AWS credentials", found, "an identity (sts)", "FAILED", fix or str(e)), None
    return Requirement("AWS credentials", f"{ident.account} {ident.arn}", "an identity (sts)", "ok"), sess


K8S_ROW = "Kubernetes version"
#: A version within this many days of the end of standard support is shown with the version to move to.
K8S_WARN_DAYS = 30


def _k8s_versions(sess, region: str) -> aws_client.Signal:
    eks = aws_client.client(sess, "eks", region)
    return aws_client.optional_call(
        eks,
        "describe_cluster_versions",
        instead="the offline calendar (plan)",
        items="clusterVersions",
        includeAll=True,
    )


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _day(t: Any) -> str:
    return t.date().isoformat() if isinstance(t, dt.datetime) else "?"


def _newest_standard(versions: list[dict[str, Any]]) -> str:
    standard = [v["clusterVersion"] for v in versions if v.get("versionStatus") == "STANDARD_SUPPORT"]
    return max(standard, key=_version_key, default="")


def k8s_version_row(settings: Settings, sess, *, today: dt.date | None = None) -> Requirement:
    """``aws.k8s_version`` against what EKS offers in the region now (``DescribeClusterVersions``)."""
    version, region = settings.aws.k8s_version, settings.aws.region
    today = today or dt.datetime.now(dt.timezone.utc).date()
    what, needed = K8S_ROW, f"offered by EKS in {region}, at most {K8S_MODELLED_VERSION}"
    if _version_key(version) > _version_key(K8S_MODELLED_VERSION):  # newer than what the tests model
        fix = (
            f'set `k8s_version: "{K8S_MODELLED_VERSION}"` under aws: in env.yaml (the newest the tutorial is tested on)'
        )
        return Requirement(what, version, needed, "TOO NEW", fix)
    signal = _k8s_versions(sess, region)
    if signal.failure is not None:
        return Requirement(what, f"{version}: {signal.line()}", needed, "unknown", signal.failure.fix())
    versions = signal.value or []
    newest = _newest_standard(versions)
    fix = f'set `k8s_version: "{newest}"` under aws: in env.yaml (or -p k8s_version {newest})' if newest else ""
    mine = next((v for v in versions if v.get("clusterVersion") == version), None)
    if mine is None:
        offered = ", ".join(sorted((v["clusterVersion"] for v in versions), key=_version_key))
        return Requirement(what, f"{version}: not offered", needed, "MISSING", f"one of {offered}: {fix}")
    status = mine.get("versionStatus") or str(mine.get("status", "")).upper().replace("-", "_")
    end_std, end_ext = (mine.get(k) for k in ("endOfStandardSupportDate", "endOfExtendedSupportDate"))
    if status == "UNSUPPORTED":
        return Requirement(what, f"{version}: unsupported since {_day(end_ext)}", needed, "TOO OLD", fix)
    if status == "EXTENDED_SUPPORT":
        found = f"{version}: extended support until {_day(end_ext)}"
        why = "the EKS control plane is billed at the extended support price meanwhile; "
        return Requirement(what, found, needed, "ok", why + fix)
    found = f"{version}: standard support until {_day(end_std)}"
    if isinstance(end_std, dt.datetime) and (end_std.date() - today).days <= K8S_WARN_DAYS and newest != version:
        return Requirement(what, found, needed, "ok", f"extended support (a higher price) from {_day(end_std)}: {fix}")
    return Requirement(what, found, needed, "ok")


def _need_by_class(settings: Settings, facts: dict[str, InstanceFacts]) -> dict[str, list[str | int]]:
    """Quota class -> [vCPUs the node groups need, what needs them]."""
    a = settings.aws
    need: dict[str, list[str | int]] = {}
    for itype, count in ((a.gpu_node_type, a.gpu_node_count), (a.system_node_type, a.system_node_count)):
        cls = quota_class(itype) or "?"
        entry = need.setdefault(cls, [0, ""])
        entry[0] = int(entry[0]) + count * facts[itype].vcpus
        entry[1] = f"{entry[1]} + " * bool(entry[1]) + f"{count} x {itype}"
    return need


def quota_rows(settings: Settings, sess) -> list[Requirement]:
    """The On-Demand vCPU quota of each class the node groups use, in ``aws.region``, against their vCPUs."""
    region = settings.aws.region
    ec2 = aws_client.client(sess, "ec2", region)
    sq = aws_client.client(sess, "service-quotas", region)
    types = sorted({settings.aws.gpu_node_type, settings.aws.system_node_type})
    try:
        facts = instance_facts(ec2, types)
    except aws_client.AwsCallError as e:
        return [Requirement(f"vCPU quota ({region})", "?", "the node groups' vCPUs", "unknown", str(e))]
    rows = []
    for cls, (vcpus, who) in _need_by_class(settings, facts).items():
        what, needed = f"{cls} vCPU quota ({region})", f"{vcpus} ({who})"
        code = (QUOTA_CLASSES.get(cls) or {}).get("od")
        if not code:
            rows.append(Requirement(what, "no quota class known", needed, "unknown", "check it in the console"))
            continue
        limit, source, sig = quota_limit(sq, code)
        if limit is None:
            fix = sig.failure.fix() if sig and sig.failure else "check it in the Service Quotas console"
            rows.append(Requirement(what, f"{source} ({code})", needed, "unknown", fix))
            continue
        state = QuotaState(cls, code, limit, source, 0, int(vcpus))
        fix = state.request_command(region) or ""
        rows.append(Requirement(what, f"{limit:.0f} ({source}, {code})", needed, "ok" if state.ok else "SHORT", fix))
    return rows


# --------------------------------------------------------------------------------------------------------------
# The table, and the gate of the billable steps
# --------------------------------------------------------------------------------------------------------------


def principal_arn(arn: str) -> str:
    """The IAM principal ``iam:SimulatePrincipalPolicy`` takes for a caller ARN: an assumed-role session's role
    (``arn:aws:sts::1:assumed-role/R/S`` -> ``arn:aws:iam::1:role/R``; a role with a path is not rebuilt), a user
    as it is; '' for anything else (the root user, a federated user)."""
    parts = arn.split(":", 5)
    if len(parts) != 6:
        return ""
    if parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        return f"{':'.join(parts[:2])}:iam::{parts[4]}:role/{parts[5].split('/')[1]}"
    return arn if parts[2] == "iam" and parts[5].startswith("user/") else ""


def permissions_row(settings: Settings, sess) -> Requirement:
    """Which of the learner policy's actions (:mod:`raytrain_helpers.plan.learner_policy`) this identity cannot
    perform, asked of IAM without side effects (``iam:SimulatePrincipalPolicy`` on the caller's role or user: its
    identity policies, and permissions boundaries; SCPs and resource policies may still deny). Never blocks: when
    the simulation itself is denied or impossible, the row says "could not check"."""
    region = settings.aws.region
    wanted = learner_policy.all_actions()
    what, needed = "IAM permissions", f"the {len(wanted)} actions of docs/iam/learner-policy.json"
    fix = "attach docs/iam/learner-policy.json (and eksctl's policies: docs/aws.md section 2) to this identity"
    ident = aws_client.identity(sess, region)
    source = principal_arn(ident.arn)
    if not source:
        return Requirement(what, f"could not check for {ident.arn}", needed, "unknown", fix, required=False)
    try:
        results = _simulate(settings, aws_client.client(sess, "iam", region), source, ident.account, wanted)
    except aws_client.call_errors() as e:
        found = f"could not check: iam:SimulatePrincipalPolicy answered {aws_client.err_code(e)}"
        return Requirement(what, found, needed, "unknown", f"allow iam:SimulatePrincipalPolicy to see; {fix}", False)
    denied = sorted(r["EvalActionName"] for r in results if r.get("EvalDecision") != "allowed")
    if not denied:
        return Requirement(what, f"all {len(wanted)} allowed for {source}", needed, "ok", required=False)
    found = f"{len(denied)} of {len(wanted)} not allowed for {source}: {', '.join(denied)}"
    return Requirement(what, found, needed, "FAILED", fix, required=False)


def _simulate(settings: Settings, iam_api, source: str, account: str, wanted: list[str]) -> list[dict]:
    """The simulation's results: the actions allowed on any resource asked about '*', each scoped action
    (``learner_policy.SCOPES``) about the tutorial's own resource, with the context its request carries."""
    a = settings.aws
    try:
        bucket = iam.storage_location(settings, account).bucket
    except ConfigError:  # a storage setting 02 refuses with its own message: ask about the derived bucket
        bucket = iam.derived_bucket_name(a.cluster_name, account, a.region)
    names = {"cluster": a.cluster_name, "role": iam.role_name(settings), "bucket": bucket}
    by_arn: dict[str, list[str]] = {}
    for action in wanted:
        arn = learner_policy.scoped_resource(action, **names, account=account, region=a.region)
        by_arn.setdefault(arn, []).append(action)
    results = []
    for arn, actions in by_arn.items():
        extra = (
            {}
            if arn == "*"
            else {"ResourceArns": [arn], "ContextEntries": learner_policy.simulation_context(a.cluster_name)}
        )
        results += aws_client.pages(
            iam_api, "simulate_principal_policy", "EvaluationResults", PolicySourceArn=source, ActionNames=actions,
            **extra,
        )  # fmt: skip
    return results


def preflight(settings: Settings, *, quota: bool = True, cluster: bool = True) -> PreflightResult:
    """Every row, in the order a learner fixes them: tools, credentials, then (with credentials and ``quota``) the
    rows that ask AWS: the vCPU quota and the IAM permissions; with ``aws.existing_cluster`` (and ``cluster``) what
    the tutorial needs from that cluster (:mod:`.cluster_check`: each step stops on its own rows there)."""
    auth, calls_aws_cli = authenticator_row()
    rows = [aws_cli_row(token_command=calls_aws_cli)] + ([auth] if auth else [])
    helm = helm_row()
    rows += [eksctl_row(), helm, kubectl_row(settings.aws.k8s_version)]
    cred, sess = credentials_row(settings)
    rows.append(cred)
    if sess is not None:
        rows.append(k8s_version_row(settings, sess))
    if quota and sess is not None:
        rows += quota_rows(settings, sess)
        rows.append(permissions_row(settings, sess))
    if quota:
        rows.append(image_row(settings))
    if quota and helm.status == "ok":
        rows += chart_rows(settings)
    if cluster and settings.aws.existing_cluster and sess is not None:  # the cluster the tutorial did not create, read
        rows += cluster_check.rows(settings, sess)
    return PreflightResult(target="aws", rows=rows)


#: The preflight row of the Ray Train image.
IMAGE_ROW = "Ray Train image (versions.dlc_image)"


def image_row(settings: Settings, resolve: Callable[[str], str] = registry.manifest_digest) -> Requirement:
    """The Ray Train image: no published source gives the digest of the default tag (docs/pins.md), so this row asks
    the registry anonymously (:func:`...clients.registry.manifest_digest`) and prints ``REPO:TAG@sha256:...`` to pin
    it with; a failed lookup only warns (the nodes pull the tag either way). ``ok`` with the digest it is pinned
    to; else ``unknown`` with the digest the tag points to now (or why that could not be read) and the line that
    pins it."""
    image = settings.versions.dlc_image
    if "@sha256:" in image:
        return Requirement(IMAGE_ROW, f"pinned: {image.split('@', 1)[1]}", "a digest", "ok", required=False)
    try:
        digest = resolve(image)
    except registry.RegistryError as e:
        return Requirement(IMAGE_ROW, f"tag only; digest not read ({e})", "a digest", "unknown",
                           "check the network, or pin it yourself: `crane digest IMAGE`", required=False)  # fmt: skip
    return Requirement(
        IMAGE_ROW,
        f"tag only; it points to {digest} now",
        "a digest",
        "unknown",
        f"pin it: `dlc_image: {image}@{digest}` under versions: in env.yaml",
        required=False,
    )


class PreflightError(aws_client.AwsError):
    """A billable step refused to start: the preflight failed (the message names each failed row and its fix)."""

    def _render_traceback_(self) -> list[str]:
        """IPython (a notebook) shows this line instead of a traceback."""
        return [f"{type(self).__name__}: {self}"]


def require(settings: Settings, before: str) -> PreflightResult:
    """Run the preflight before ``before`` (a billable step); :class:`PreflightError` when a required row failed
    (the table is printed first), one line when it passed."""
    result = preflight(settings, cluster=False)  # the tools and the account: the cluster's own rows are its steps'
    if not result.ok:
        result.show()
        raise PreflightError(
            f"{before} did not start: {result.summary()}. Fix: the fixes printed above, then check again with "
            f"`raytrain-tutorial check --target aws`"
        )
    print(f"preflight before {before}: OK ({', '.join(f'{r.what} {r.found}' for r in result.rows[:2])})")
    return result


__all__ = [
    "AWS_CLI_V1_FIX",
    "AWS_CLI_V2_MIN",
    "IMAGE_ROW",
    "PreflightError",
    "aws_cli_row",
    "chart_rows",
    "credentials_row",
    "eksctl_row",
    "helm_row",
    "image_row",
    "k8s_version_row",
    "kubectl_row",
    "parse_authenticator",
    "parse_aws_cli",
    "parse_eksctl",
    "parse_helm",
    "parse_kubectl",
    "permissions_row",
    "preflight",
    "principal_arn",
    "quota_rows",
    "require",
    "tool_version",
    "version_tuple",
]
