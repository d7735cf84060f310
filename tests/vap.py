"""A ValidatingAdmissionPolicy evaluated as the API server does, with a real CEL implementation (cel-python,
``celpy``): the policy's own expressions, never a rewrite of them.

What it follows (Kubernetes 1.35, "Validating Admission Policy" and the ``ValidatingAdmissionPolicySpec`` field
docs): every ``matchConditions`` expression is evaluated first and any false one skips the policy; then
``variables`` are evaluated in order and are visible to later ones and to the validations as ``variables.<name>``;
the request is refused when a validation is false, or (``failurePolicy: Fail``) when an expression errors, e.g.
reads a field the object does not have without ``has()``. Only ``object`` is bound (no ``oldObject``, ``request``
or ``params``: the tutorial's policies use none).
"""

from __future__ import annotations

from typing import Any

import celpy

_ENV = celpy.Environment()


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    program = _ENV.program(_ENV.compile(expression))
    value = program.evaluate(activation)
    if isinstance(value, celpy.CELEvalError):
        raise value
    return value


def refusals(policy: dict[str, Any], obj: dict[str, Any]) -> list[str] | None:
    """The messages the API server would refuse ``obj`` with under ``policy``: [] = admitted, None = the policy's
    matchConditions skip it."""
    spec = policy["spec"]
    activation: dict[str, Any] = {"object": celpy.json_to_cel(obj)}
    try:
        for cond in spec.get("matchConditions") or []:
            if not bool(_evaluate(cond["expression"], activation)):
                return None
    except celpy.CELEvalError as e:
        return [f"matchCondition error: {e}"]
    variables: dict[str, Any] = {}
    out: list[str] = []
    try:
        for var in spec.get("variables") or []:
            variables[var["name"]] = _evaluate(var["expression"], {**activation, "variables": variables})
    except celpy.CELEvalError as e:
        return [f"variable error: {e}"]
    activation["variables"] = celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in variables.items()})
    for rule in spec["validations"]:
        try:
            ok = bool(_evaluate(rule["expression"], activation))
        except celpy.CELEvalError as e:
            ok, rule = False, {**rule, "message": f"{rule['message']} (expression error: {e})"}
        if not ok:
            out.append(rule["message"])
    return out
