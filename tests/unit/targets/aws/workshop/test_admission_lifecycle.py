"""targets.aws.workshop.facilitator: an attendee's admission policies go in with their namespace, before their Role,
and out only once the namespace is gone (Kubernetes API stand-in)."""

from __future__ import annotations

from raytrain_helpers.plan import workshop_admission, workshop_namespace
from raytrain_helpers.targets.aws.workshop import facilitator
from tests.fakes.k8s_standin import standin
from tests.unit.plan.test_workshop_namespace import settings

API = workshop_admission.API


def test_the_policies_are_created_with_the_namespace_and_removed_after_it(monkeypatch):
    s = settings()
    objs = workshop_namespace.namespace_objects(s, 8)
    names = [
        (o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in facilitator.ADMISSION_KINDS
    ]
    assert len(names) == 6
    with standin("healthy", set_env=True, delay_s=0.05) as st:
        done, said, uid = facilitator.create_namespace(s, objs)
        assert done and uid, said
        for _, kind, name in names:
            plural = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies"}.get(kind, kind.lower() + "s")
            assert st.get(API, plural, name) is not None, (kind, name)
        deleted = []  # (kind, name, the namespace still there) of each delete, in order
        real_delete = facilitator.kube.delete

        def delete(api, api_version, kind, name, *a, **kw):
            deleted.append((kind, name, st.get("v1", "namespaces", s.kubernetes.namespace) is not None))
            return real_delete(api, api_version, kind, name, *a, **kw)

        monkeypatch.setattr(facilitator.kube, "delete", delete)
        done, said = facilitator.remove_namespace(s, assume_yes=True, uid=uid, objects=objs, timeout_s=10, poll_s=0.05)
        assert done, said
        policies = [(k, n, there) for k, n, there in deleted if k in facilitator.ADMISSION_KINDS]
        assert sorted((k, n) for k, n, _ in policies) == sorted((k, n) for _, k, n in names)
        assert not any(there for *_, there in policies), "a policy was deleted while the namespace still existed"
        kinds = [k for k, *_ in policies]
        assert kinds == sorted(kinds, key=facilitator.ADMISSION_KINDS.index), "bindings go before their policies"
        assert st.get("v1", "namespaces", s.kubernetes.namespace) is None
        assert st.objects(API, "validatingadmissionpolicies") == []
        assert st.objects(API, "validatingadmissionpolicybindings") == []
