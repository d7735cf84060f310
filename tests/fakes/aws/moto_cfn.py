"""CloudFormation's answer to a managed node group that EC2 has no capacity for, added to moto (test-only).

moto 5.2.1 creates every stack ``CREATE_COMPLETE`` (it skips resource types it does not model, such as
``AWS::EKS::Nodegroup``). Real CloudFormation, when a stack's ``AWS::EKS::Nodegroup`` cannot launch its
instances, marks that resource ``CREATE_FAILED`` with EKS's reason, rolls the stack back (``ROLLBACK_IN_PROGRESS``,
where eksctl stops waiting and exits 1) and leaves it in ``ROLLBACK_COMPLETE`` until someone deletes it. The
reason's text is EKS's, as eksctl prints it from the stack's
events (eksctl-io/eksctl issue #4732, 2022-02-02):

    Nodegroup mng-2 failed to stabilize: [{Code: AsgInstanceLaunchFailures,Message: Could not launch On-Demand
    Instances. InsufficientInstanceCapacity - We currently do not have sufficient p2.xlarge capacity in the
    Availability Zone you requested (us-west-2b). Our system will be working on provisioning additional capacity.
    You can currently get p2.xlarge capacity by not specifying an Availability Zone in your request or choosing
    us-west-2a, us-west-2c. Launching EC2 instance failed.,ResourceIds: [eks-mng-2-82bf5c07-...]}]

and the stack's own rollback event is CloudFormation's "The following resource(s) failed to create: [...].
Rollback requested by user." (eksctl-io/eksctl issue #654). Whether EC2 has the capacity is read from
``moto_ext.FAKE.capacity`` ((region, AZ name, instance type) -> instances free; missing = unlimited), the same
table the capacity-reservation fakes use.

Termination protection, which moto 5.2.1 stores from ``CreateStack`` and reports in ``DescribeStacks`` but does not
enforce, and whose ``UpdateTerminationProtection`` it does not implement (``NotImplementedError``), as the
CloudFormation API Reference documents them (API_UpdateTerminationProtection, API_DeleteStack; User Guide
"Protect CloudFormation stacks from being deleted", using-cfn-protect-stacks):

* ``UpdateTerminationProtection`` (``StackName``: name or unique id; ``EnableTerminationProtection``, required) sets
  the flag and answers the stack's ``StackId``; a stack that does not exist, or is ``DELETE_IN_PROGRESS`` /
  ``DELETE_COMPLETE`` ("You can set termination protection on a stack with any status except ..."), is a
  ``ValidationError``;
* ``DeleteStack`` of a protected stack fails "and the stack, including its status, remains unchanged": HTTP 400
  ``ValidationError`` ``Stack [NAME] cannot be deleted while TerminationProtection is enabled``, the text AWS
  answers (quoted in rackspace/runway PR #199 and ekristen/aws-nuke issue #821, the latter for an eksctl 0.220.0
  stack), with ``NAME`` the name or id the caller gave.
"""

from __future__ import annotations

import json
from typing import Any

from . import moto_ext

#: EKS's reason for a managed node group whose Auto Scaling group could not launch On-Demand instances.
CAPACITY_REASON = (
    "Nodegroup {ng} failed to stabilize: [{{Code: AsgInstanceLaunchFailures,Message: Could not launch On-Demand "
    "Instances. InsufficientInstanceCapacity - We currently do not have sufficient {itype} capacity in the "
    "Availability Zone you requested ({az}). Our system will be working on provisioning additional capacity. You "
    "can currently get {itype} capacity by not specifying an Availability Zone in your request or choosing "
    "{others}. Launching EC2 instance failed.,ResourceIds: [eks-{ng}-5ec1c0de-0000-4000-8000-000000000000]}}]"
)


def _nodegroups(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    res = template.get("Resources") or {}
    return [(k, v.get("Properties") or {}) for k, v in res.items() if v.get("Type") == "AWS::EKS::Nodegroup"]


def _short(account: str, region: str, props: dict[str, Any]) -> tuple[str, str, str] | None:
    """(instance type, AZ, a list of other AZs) when EC2 cannot launch this node group's instances, else None."""
    from moto.ec2.models import ec2_backends

    itype = (props.get("InstanceTypes") or ["m5.large"])[0]
    want = int((props.get("ScalingConfig") or {}).get("DesiredSize", 1))
    ec2 = ec2_backends[account][region]
    azs = sorted({ec2.get_subnet(s).availability_zone for s in props.get("Subnets") or []})
    with moto_ext.FAKE.lock:
        for az in azs:
            free = moto_ext.FAKE.capacity.get((region, az, itype))
            if free is not None and free < want:
                others = sorted(
                    z
                    for (r, z, t), n in moto_ext.FAKE.capacity.items()
                    if r == region and t == itype and z != az and n >= want
                )
                return itype, az, ", ".join(others) or "another Availability Zone"
    return None


def _roll_back(stack, logical_id: str, reason: str) -> None:  # noqa: ANN001 - moto's FakeStack
    from moto.cloudformation.models import Event

    def event(logical, rtype, status, why):
        e = Event(stack.stack_id, stack.name, logical, "", rtype, status, why, None)
        stack.events.append(e)

    event(logical_id, "AWS::EKS::Nodegroup", "CREATE_IN_PROGRESS", None)
    event(logical_id, "AWS::EKS::Nodegroup", "CREATE_FAILED", reason)
    stack._add_stack_event(
        "ROLLBACK_IN_PROGRESS",
        resource_status_reason=(
            f"The following resource(s) failed to create: [{logical_id}]. Rollback requested by user."
        ),
    )
    stack.status = "ROLLBACK_IN_PROGRESS"
    with moto_ext.FAKE.lock:
        ROLLING_BACK[stack.stack_id] = (stack, logical_id, ROLLBACK_READS)


#: Stacks rolling back: stack id -> (stack, the failed resource, DescribeStacks calls left before ROLLBACK_COMPLETE).
ROLLING_BACK: dict[str, tuple[Any, str, int]] = {}
#: How many DescribeStacks calls (of any stack) a rollback takes: eksctl, which reads the stack once right after
#: creating it, sees ROLLBACK_IN_PROGRESS and exits, as the real one does; the node group's deletion takes longer.
ROLLBACK_READS = 3


def _advance_rollbacks() -> None:
    from moto.cloudformation.models import Event

    with moto_ext.FAKE.lock:
        for sid, (stack, logical_id, left) in list(ROLLING_BACK.items()):
            if left > 1:
                ROLLING_BACK[sid] = (stack, logical_id, left - 1)
                continue
            del ROLLING_BACK[sid]
            done = Event(
                stack.stack_id, stack.name, logical_id, "", "AWS::EKS::Nodegroup", "DELETE_COMPLETE", None, None
            )
            stack.events.append(done)
            stack._add_stack_event("ROLLBACK_COMPLETE")
            stack.status = "ROLLBACK_COMPLETE"


def _wrap_describe_stacks(original):
    def describe_stacks(self):  # noqa: ANN001, ANN202 - moto response method
        _advance_rollbacks()
        return original(self)

    return describe_stacks


def _wrap_create_stack(original):
    def create_stack(self):  # noqa: ANN001, ANN202 - moto response method
        from moto.cloudformation.models import cloudformation_backends

        result = original(self)
        body = self._get_param("TemplateBody") or "{}"
        try:
            template = json.loads(body)
        except ValueError:
            return result
        for logical_id, props in _nodegroups(template):
            short = _short(self.current_account, self.region, props)
            if short is None:
                continue
            itype, az, others = short
            backend = cloudformation_backends[self.current_account][self.region]
            stack = backend.get_stack(self._get_param("StackName"))
            reason = CAPACITY_REASON.format(
                ng=props.get("NodegroupName", logical_id), itype=itype, az=az, others=others
            )
            _roll_back(stack, logical_id, reason)
            break
        return result

    return create_stack


#: CloudFormation's refusal to delete a protected stack (the caller's StackName in the brackets).
PROTECTED = "Stack [{name}] cannot be deleted while TerminationProtection is enabled"


def _live_stack(self, name_or_id: str):  # noqa: ANN001, ANN202 - moto response and stack
    """The stack ``name_or_id`` names that is not deleted, or None (moto finds deleted stacks by id too)."""
    from moto.cloudformation.exceptions import ValidationError

    try:
        stack = self.cloudformation_backend.get_stack(name_or_id)
    except ValidationError:
        return None
    return stack if stack.stack_id in self.cloudformation_backend.stacks else None


def _wrap_delete_stack(original):
    def delete_stack(self):  # noqa: ANN001, ANN202 - moto response method
        from moto.cloudformation.exceptions import ValidationError

        name = self._get_param("StackName")
        stack = _live_stack(self, name)
        if stack is not None and stack.enable_termination_protection:
            raise ValidationError(name, PROTECTED.format(name=name))
        return original(self)

    return delete_stack


def _update_termination_protection(self):  # noqa: ANN001, ANN202 - moto response method
    from moto.cloudformation.exceptions import ValidationError
    from moto.core.responses import ActionResult

    name = self._get_param("StackName")
    enable = self._get_bool_param("EnableTerminationProtection")  # required: botocore refuses a call without it
    stack = _live_stack(self, name)
    if stack is None or stack.status == "DELETE_IN_PROGRESS":
        raise ValidationError(name)
    stack.enable_termination_protection = bool(enable)
    return ActionResult({"StackId": stack.stack_id})


def install() -> None:
    """Patch moto's CloudFormation CreateStack, DescribeStacks and DeleteStack, and add UpdateTerminationProtection
    (idempotent; called by :func:`moto_ext.install`)."""
    from moto.cloudformation.responses import CloudFormationResponse

    if getattr(CloudFormationResponse, "_raytrain_capacity_installed", False):
        return
    CloudFormationResponse.create_stack = _wrap_create_stack(CloudFormationResponse.create_stack)
    CloudFormationResponse.describe_stacks = _wrap_describe_stacks(CloudFormationResponse.describe_stacks)
    CloudFormationResponse.delete_stack = _wrap_delete_stack(CloudFormationResponse.delete_stack)
    CloudFormationResponse.update_termination_protection = _update_termination_protection
    CloudFormationResponse._raytrain_capacity_installed = True
