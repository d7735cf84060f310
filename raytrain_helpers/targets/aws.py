"""The ``aws`` target's plumbing: boto3 sessions, the account banner, confirmation, eksctl, waits, placement.

Credentials come only from the standard boto3 chain (environment, ``AWS_PROFILE``, SSO, instance role...);
nothing here takes a key as a parameter, and nothing prints one: :func:`redact` scrubs the live
credentials out of every line of subprocess output before it is shown. ``AWS_ENDPOINT_URL`` (honoured
by botocore itself) points every client at a test server such as moto.

Billable or destructive actions go through :func:`confirm`: ``assume_yes=True``, or an interactive
"yes" when a person can answer (a TTY, or a notebook kernel that allows input). A headless run without
``assume_yes`` is refused with a message that says how to allow it; papermill runs never prompt.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..config import ConfigError, Settings

#: A tag on everything this tutorial creates outside eksctl (capacity probes), so leftovers can be found.
TAG_KEY = "raytrain-tutorial"
PROBE_TAG_KEY = "raytrain-tutorial/probe"
USER_AGENT = "raytrain-tutorial"

EKSCTL_INSTALL_HINT = (
    "eksctl is not on PATH. Install it (https://eksctl.io/installation/), e.g. on Linux x86_64:\n"
    "  curl -sLO \"https://github.com/eksctl-io/eksctl/releases/latest/download/eksctl_Linux_amd64.tar.gz\"\n"
    "  tar -xzf eksctl_Linux_amd64.tar.gz -C /tmp && sudo install -m 0755 /tmp/eksctl /usr/local/bin/eksctl\n"
    "or `brew install eksctl` on macOS; then re-run this step (it resumes from the real state).")


class AwsTargetError(RuntimeError):
    """Something on the AWS side failed or is in a state this step cannot continue from."""


class ConfirmationRefused(AwsTargetError):
    """A billable or destructive action was not confirmed."""


class WaitTimeout(AwsTargetError):
    """A resource stayed in a transitional state for too long (stuck)."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


# --------------------------------------------------------------------------------------------
# Sessions and identity
# --------------------------------------------------------------------------------------------

def session(region: str | None = None):
    """A boto3 session from the standard credential chain (profile, environment, SSO, role)."""
    import boto3
    return boto3.session.Session(region_name=region)


def client(sess, service: str, region: str | None = None):
    from botocore.config import Config
    cfg = Config(user_agent_extra=USER_AGENT, retries={"max_attempts": 8, "mode": "standard"},
                 connect_timeout=10, read_timeout=60)
    return sess.client(service, region_name=region or sess.region_name, config=cfg)


@dataclass
class Identity:
    account: str
    arn: str
    region: str

    def line(self) -> str:
        return f"AWS account {self.account} ({self.arn}), region {self.region}"


def identity(sess, region: str) -> Identity:
    """Who are we? Raises AwsTargetError (with the fix) when no credentials resolve."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    try:
        who = client(sess, "sts", region).get_caller_identity()
    except NoCredentialsError:
        raise AwsTargetError(
            "no AWS credentials found. Fix: `aws configure`, `aws sso login --profile NAME` and "
            "`export AWS_PROFILE=NAME`, or run where an instance/role profile provides them") from None
    except ClientError as e:
        raise AwsTargetError(f"sts:GetCallerIdentity failed ({_err_code(e)}): {_err_msg(e)}. Fix: refresh "
                             f"the credentials of the active profile (e.g. `aws sso login`)") from None
    except BotoCoreError as e:
        raise AwsTargetError(f"cannot reach AWS STS: {e}") from None
    return Identity(account=who["Account"], arn=who["Arn"], region=region)


def region_note(settings: Settings) -> str | None:
    """env.yaml's region is the one used; say so when the shell's AWS region differs."""
    env_region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if env_region and env_region != settings.aws.region:
        return (f"note: using region {settings.aws.region} from the settings; the environment says "
                f"{env_region} (AWS_REGION/AWS_DEFAULT_REGION). Change it with `-p region {env_region}` "
                f"or RAYTRAIN_REGION={env_region}")
    return None


def redact(text: str, sess=None) -> str:
    """Remove anything credential-like from text that is about to be printed or saved."""
    secrets: list[str] = []
    if sess is not None:
        try:
            creds = sess.get_credentials()
            if creds is not None:
                frozen = creds.get_frozen_credentials()
                secrets = [s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s]
        except Exception:  # noqa: BLE001 - redaction must never fail the caller
            secrets = []
    for env in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        if os.environ.get(env):
            secrets.append(os.environ[env])
    for s in sorted(set(secrets), key=len, reverse=True):
        if len(s) >= 8:
            text = text.replace(s, "***")
    text = re.sub(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b", "***", text)
    return text


def _err_code(e: Exception) -> str:
    return getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)


def _err_msg(e: Exception) -> str:
    return getattr(e, "response", {}).get("Error", {}).get("Message", str(e))


err_code = _err_code
err_msg = _err_msg


# --------------------------------------------------------------------------------------------
# Confirmation
# --------------------------------------------------------------------------------------------

def _kernel_allows_input() -> bool:
    """True inside a Jupyter kernel whose current request allows stdin (never under papermill)."""
    try:
        from IPython import get_ipython  # type: ignore
    except ImportError:
        return False
    ip = get_ipython()
    kernel = getattr(ip, "kernel", None)
    return bool(kernel is not None and getattr(kernel, "_allow_stdin", False))


def interactive() -> bool:
    try:
        if sys.stdin is not None and sys.stdin.isatty():
            return True
    except (ValueError, AttributeError):
        pass
    return _kernel_allows_input()


def confirm(what: str, ident: Identity, *, assume_yes: bool, details: Sequence[str] = (),
            input_fn: Callable[[str], str] | None = None) -> None:
    """Show the account, region and action; return when confirmed, raise ConfirmationRefused otherwise."""
    print(f"About to: {what}")
    print(f"  in {ident.line()}")
    for d in details:
        print(f"  - {d}")
    if assume_yes:
        print("  confirmed by assume_yes=True / --yes")
        return
    if input_fn is None and not interactive():
        raise ConfirmationRefused(
            f"refusing to {what} without confirmation in a non-interactive run. "
            f"Fix: pass assume_yes=True (notebook parameter assume_yes, CLI --yes) after checking the "
            f"account and region above")
    answer = (input_fn or input)("Type 'yes' to continue: ").strip().lower()
    if answer not in ("yes", "y"):
        raise ConfirmationRefused(f"not confirmed ({answer!r}): nothing was done")


# --------------------------------------------------------------------------------------------
# Regions and AZs
# --------------------------------------------------------------------------------------------

#: AZ IDs where the EKS control plane cannot place its network interfaces (EKS user guide).
EKS_UNSUPPORTED_AZ_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})


def enabled_regions(ec2) -> list[str]:
    return sorted(r["RegionName"] for r in ec2.describe_regions(AllRegions=False)["Regions"])


def validate_regions(ec2, wanted: Iterable[str] | None, default_region: str) -> list[str]:
    """The regions to look at: each must exist and be enabled for this account."""
    enabled = enabled_regions(ec2)
    if wanted is None:
        return enabled
    wanted = [w.strip() for w in wanted if w and w.strip()]
    if not wanted:
        return [default_region]
    known = set(enabled)
    try:
        every = {r["RegionName"] for r in ec2.describe_regions(AllRegions=True)["Regions"]}
    except Exception:  # noqa: BLE001 - AllRegions is only a nicer message
        every = known
    for w in wanted:
        if w not in known:
            if w in every:
                raise ConfigError(f"region {w!r} is not enabled for this account (an opt-in region). Fix: enable "
                                  f"it in the AWS console (Account > AWS Regions) or drop it from --regions")
            raise ConfigError(f"unknown region {w!r}. Fix: use enabled regions such as "
                              f"{', '.join(sorted(known)[:8])}")
    return list(dict.fromkeys(wanted))


def zones(ec2) -> dict[str, dict[str, Any]]:
    """AZ name -> {id, state, opt_in} for the client's region (availability zones only)."""
    out = {}
    for z in ec2.describe_availability_zones(AllAvailabilityZones=False)["AvailabilityZones"]:
        if z.get("ZoneType", "availability-zone") != "availability-zone":
            continue
        out[z["ZoneName"]] = dict(id=z.get("ZoneId", ""), state=z.get("State", "available"),
                                  opt_in=z.get("OptInStatus", "opt-in-not-required"))
    return out


def offering_azs(ec2, instance_type: str) -> list[str]:
    azs: set[str] = set()
    kwargs: dict[str, Any] = dict(LocationType="availability-zone",
                                  Filters=[{"Name": "instance-type", "Values": [instance_type]}])
    while True:
        resp = ec2.describe_instance_type_offerings(**kwargs)
        azs.update(o["Location"] for o in resp.get("InstanceTypeOfferings", []))
        if not resp.get("NextToken"):
            break
        kwargs["NextToken"] = resp["NextToken"]
    return sorted(azs)


# --------------------------------------------------------------------------------------------
# Cluster networking as it really is
# --------------------------------------------------------------------------------------------

def describe_cluster(eks, name: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError
    try:
        return eks.describe_cluster(name=name)["cluster"]
    except ClientError as e:
        if _err_code(e) == "ResourceNotFoundException":
            return None
        raise


def describe_nodegroup(eks, cluster: str, name: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError
    try:
        return eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    except ClientError as e:
        if _err_code(e) == "ResourceNotFoundException":
            return None
        raise


def private_subnets_by_az(ec2, subnet_ids: Sequence[str]) -> dict[str, list[str]]:
    """AZ -> private subnet ids among ``subnet_ids``.

    A subnet is private when its route table (explicit association, else the VPC's main table) sends
    0.0.0.0/0 anywhere but an internet gateway (e.g. a NAT gateway) or nowhere at all.
    """
    if not subnet_ids:
        return {}
    subnets = ec2.describe_subnets(SubnetIds=list(subnet_ids))["Subnets"]
    vpcs = sorted({s["VpcId"] for s in subnets})
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": vpcs}])["RouteTables"]
    explicit: dict[str, dict] = {}
    main: dict[str, dict] = {}
    for t in tables:
        for a in t.get("Associations", []):
            if a.get("Main"):
                main[t["VpcId"]] = t
            elif a.get("SubnetId"):
                explicit[a["SubnetId"]] = t
    out: dict[str, list[str]] = {}
    for s in subnets:
        table = explicit.get(s["SubnetId"]) or main.get(s["VpcId"])
        public = False
        if table is not None:
            for r in table.get("Routes", []):
                if r.get("DestinationCidrBlock") == "0.0.0.0/0" and str(r.get("GatewayId", "")).startswith("igw-"):
                    public = True
        elif s.get("MapPublicIpOnLaunch"):
            public = True
        if not public:
            out.setdefault(s["AvailabilityZone"], []).append(s["SubnetId"])
    return {k: sorted(v) for k, v in sorted(out.items())}


# --------------------------------------------------------------------------------------------
# Placement: the (region, AZ) decided by step 01 and read by every later step
# --------------------------------------------------------------------------------------------

def runs_dir(settings: Settings) -> Path:
    env_file = settings.__dict__.get("_env_file")
    base = Path(env_file).parent if env_file else Path.cwd()
    return Path(os.environ.get("RAYTRAIN_RUNS_DIR", base / "runs")).resolve()


def placement_path(settings: Settings) -> Path:
    """``runs/<run_name>/placement.json`` next to env.yaml."""
    return runs_dir(settings) / settings.run_name / "placement.json"


def load_placement(settings: Settings) -> dict[str, Any] | None:
    p = placement_path(settings)
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p} is not valid JSON ({e}). Fix: delete it and re-run step 01 (capacity)") from None
    for k in ("region", "az", "instance_type"):
        if not data.get(k):
            raise ConfigError(f"{p} lacks {k!r}. Fix: delete it and re-run step 01 (capacity)")
    return data


def save_placement(settings: Settings, data: dict[str, Any]) -> Path:
    p = placement_path(settings)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, p)
    return p


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


# --------------------------------------------------------------------------------------------
# Interrupts: run a critical section to its cleanup even when Ctrl-C / kernel interrupt / SIGTERM arrive
# --------------------------------------------------------------------------------------------

class DeferredInterrupt:
    """Within the block, SIGINT and SIGTERM are recorded instead of raised; call :meth:`reraise` after cleanup."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def _handler(self, signum, frame) -> None:  # noqa: ANN001
        if self.signum is None:
            print(f"\ninterrupt ({signal.Signals(signum).name}) received: finishing cleanup first", flush=True)
        self.signum = signum

    def __enter__(self) -> "DeferredInterrupt":
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._old[s] = signal.signal(s, self._handler)
                except (ValueError, OSError):  # pragma: no cover - exotic embedding
                    pass
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()

    def reraise(self) -> None:
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum == signal.SIGTERM:
            raise SystemExit(128 + signal.SIGTERM)


# --------------------------------------------------------------------------------------------
# eksctl as a subprocess, with a progress bar while it runs
# --------------------------------------------------------------------------------------------

def eksctl_path() -> str:
    path = shutil.which("eksctl")
    if not path:
        raise AwsTargetError(EKSCTL_INSTALL_HINT)
    return path


class _Progress:
    """A tqdm bar without a total: it shows the current state and the elapsed time.

    In a terminal or a live notebook it refreshes every second; in a log or a headless (papermill) run it
    writes a line only when the state changes or every minute, so outputs stay short.
    """

    def __init__(self, desc: str) -> None:
        in_kernel = False
        try:
            from IPython import get_ipython  # type: ignore
            in_kernel = getattr(get_ipython(), "kernel", None) is not None
        except ImportError:
            pass
        live = _kernel_allows_input() if in_kernel else _isatty(sys.stdout)
        if in_kernel and live:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm
        self.every = 1.0 if live else 60.0
        self.bar = tqdm(total=None, desc=desc, bar_format="{desc} | elapsed {elapsed}", leave=True,
                        file=sys.stdout, mininterval=self.every, dynamic_ncols=live)
        self.desc = desc
        self.state = None
        self.last = time.monotonic()

    def set(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.bar.set_description_str(f"{self.desc}: {state}", refresh=True)
            self.last = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self.last >= self.every:
            self.bar.refresh()
            self.last = time.monotonic()

    def close(self) -> None:
        self.bar.close()


def _isatty(f) -> bool:
    try:
        return bool(f.isatty())
    except (AttributeError, ValueError):
        return False


def progress(desc: str) -> _Progress:
    return _Progress(desc)


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int
    log_path: Path
    tail: list[str] = field(default_factory=list)


def run_eksctl(args: Sequence[str], *, log_path: Path, sess=None, desc: str = "eksctl",
               poll: Callable[[], str] | None = None, poll_every: float = 20.0,
               timeout: float = 3 * 3600) -> CommandResult:
    """Run ``eksctl ARGS`` with its output in ``log_path`` and a progress bar showing ``poll()``'s state."""
    exe = eksctl_path()
    argv = [exe, *args]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    shown = " ".join(["eksctl", *args])
    print(f"$ {shown}    (log: {log_path})", flush=True)
    lines: list[str] = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1, start_new_session=True)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                clean = redact(line.rstrip("\n"), sess)
                lines.append(clean)
                log.write(clean + "\n")
                log.flush()

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        bar = progress(desc)
        start = time.monotonic()
        last_poll = -1e9
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if poll is not None and now - last_poll >= poll_every:
                    last_poll = now
                    try:
                        bar.set(poll())
                    except Exception as e:  # noqa: BLE001 - a failed poll must not kill the wait
                        bar.set(f"(state unknown: {_err_code(e)})")
                if now - start > timeout:
                    proc.terminate()
                    raise AwsTargetError(f"{shown} did not finish within {timeout / 60:.0f} min; see {log_path}")
                bar.tick()
                time.sleep(0.2)
        except KeyboardInterrupt:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
            print(f"\ninterrupted: eksctl stopped, but CloudFormation carries on with what it started. "
                  f"Re-run the step to resume from the real state, or run `down` to remove it. Log: {log_path}")
            raise
        finally:
            t.join(timeout=5)
            bar.close()
    res = CommandResult(argv=[*["eksctl"], *args], returncode=proc.returncode, log_path=log_path, tail=lines[-25:])
    return res


def wait_until(fetch: Callable[[], str], *, done: Callable[[str], bool], desc: str, timeout: float,
               every: float) -> str:
    """Poll ``fetch()`` (a state string) until ``done(state)``; a progress bar shows state and elapsed time."""
    bar = progress(desc)
    start = time.monotonic()
    try:
        while True:
            state = fetch()
            bar.set(state)
            if done(state):
                return state
            if time.monotonic() - start > timeout:
                raise WaitTimeout(f"{desc}: still {state} after {timeout / 60:.1f} min", state)
            slept = 0.0
            while slept < every:
                time.sleep(min(0.2, every))
                slept += min(0.2, every)
                bar.tick()
    finally:
        bar.close()


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], title: str | None = None) -> None:
    from ..report import table as report_table  # the shared plain-text table
    report_table(rows, headers, title=title)


