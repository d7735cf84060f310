"""Where libfabric's ``fi_info`` lives in a worker pod, and the command 06 runs to find the EFA provider.

The EFA installer puts libfabric (and its ``fi_info``) under ``/opt/amazon/efa``; its ``bin`` folder is not on every
image's PATH (a login shell's profile adds it; ``kubectl exec`` starts no login shell). The AWS EKS user guide's
own check runs it by its full path: ``kubectl exec ... -- /opt/amazon/efa/bin/fi_info -p efa`` (docs.aws.amazon.com
/eks/latest/userguide/node-efa.html, checked 2026-12-04). The command below looks on PATH first, then in that folder,
through ``/bin/sh`` so that a missing ``fi_info`` is an ordinary exit 127 with the shell's message (an exec of a
missing program fails inside the container runtime instead, with no exit code to report).
"""

from __future__ import annotations

#: The EFA installer's tools folder (libfabric's fi_info, fi_pingpong).
EFA_BIN = "/opt/amazon/efa/bin"


def fi_info_command(provider: str = "efa", efa_bin: str = EFA_BIN) -> list[str]:
    """``fi_info -p PROVIDER`` from PATH or from ``efa_bin``, as an argv for an exec in a pod."""
    return ["/bin/sh", "-c", f'PATH="$PATH:{efa_bin}"; export PATH; exec fi_info -p {provider}']


__all__ = ["EFA_BIN", "fi_info_command"]
