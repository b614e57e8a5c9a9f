"""What agent-sandbox's controller makes of deploy/agent-sandbox, at the release deploy/ pins.

No controller runs here, so the tests need the pods it would create to check them -- the
admission guard must admit them, the NetworkPolicy must select them -- and this models exactly
that, from the controller's source at the pinned tag (kubernetes-sigs/agent-sandbox v0.5.6):

  * a warm pod: extensions/controllers/sandboxwarmpool_controller.go buildSandboxCR (a Sandbox
    named POOL-xxxxx, the template's pod spec after ApplySandboxSecureDefaults in utils.go,
    pool and template labels) made into a Pod by controllers/sandbox_controller.go reconcilePod
    (the template's labels but the agents.x-k8s.io/ ones, the name-hash label, the extension
    labels, created-by, the propagated-labels annotation, the Sandbox as controller owner);
  * the same pod once claimed: sandboxclaim_controller.go completeAdoption (the Sandbox now
    owned by the claim, the claim's additionalPodMetadata merged) and sandbox_controller.go
    updatePodMetadata (what of that reaches the pod; the warm-pool label removed);
  * the NetworkPolicy the controller adds for a template whose networkPolicyManagement is
    Managed and that names no policy (sandboxtemplate_controller.go buildDefaultNetworkPolicySpec).

A new pinned release means reading those functions again and updating this file with it.
"""
import copy

SYSTEM_PREFIXES = ("agents.x-k8s.io/", "extensions.agents.x-k8s.io/")
NAME_HASH = "agents.x-k8s.io/sandbox-name-hash"
WARM_POOL = "agents.x-k8s.io/warm-pool-sandbox"
TEMPLATE_REF_HASH = "agents.x-k8s.io/sandbox-template-ref-hash"
CREATED_BY = "agents.x-k8s.io/created-by"
PROPAGATED_LABELS = "agents.x-k8s.io/propagated-labels"
PROPAGATED_ANNOTATIONS = "agents.x-k8s.io/propagated-annotations"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def name_hash(name):
    """NameHash: FNV-1a (32 bits) of the name, 8 hex digits."""
    h = 0x811C9DC5
    for b in name.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def _system(key):
    return key.startswith(SYSTEM_PREFIXES)


def warm_pod(template, pool, sandbox_name, namespace="boxkite", eviction=True):
    """The Pod of one warm-pool Sandbox. eviction: the controller's --enable-warm-pool-eviction,
    which adds the autoscaler's safe-to-evict annotation to the pod template."""
    assert pool["spec"]["sandboxTemplateRef"]["name"] == template["metadata"]["name"]
    meta = copy.deepcopy(template["spec"]["podTemplate"].get("metadata") or {})
    spec = copy.deepcopy(template["spec"]["podTemplate"]["spec"])
    # ApplySandboxSecureDefaults: no token unless the template says; public DNS only under the
    # Managed default policy.
    spec.setdefault("automountServiceAccountToken", False)
    if template["spec"].get("networkPolicyManagement", "Managed") == "Managed" and not template["spec"].get(
            "networkPolicy") and not spec.get("dnsPolicy"):
        spec["dnsPolicy"], spec["dnsConfig"] = "None", {"nameservers": ["8.8.8.8", "1.1.1.1"]}
    annotations = dict(meta.get("annotations") or {})
    if eviction:
        annotations.setdefault(SAFE_TO_EVICT, "true")
    template_labels = {k: v for k, v in (meta.get("labels") or {}).items() if not _system(k)}
    labels = dict(template_labels)
    labels[NAME_HASH] = name_hash(sandbox_name)
    labels[WARM_POOL] = name_hash(pool["metadata"]["name"])
    labels[TEMPLATE_REF_HASH] = name_hash(template["metadata"]["name"])
    labels[CREATED_BY] = "controller"
    pod_annotations = {k: v for k, v in annotations.items() if not _system(k)}
    if template_labels:
        pod_annotations[PROPAGATED_LABELS] = ",".join(sorted(template_labels))
    if any(not _system(k) for k in annotations):
        pod_annotations[PROPAGATED_ANNOTATIONS] = ",".join(sorted(k for k in annotations if not _system(k)))
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": sandbox_name, "namespace": namespace, "labels": labels, "annotations": pod_annotations,
            "ownerReferences": [{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": sandbox_name,
                                 "uid": "6f1c2a9e-0000-4000-8000-000000000001", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }


def claimed_pod(pod, template, claim):
    """The warm pod after claim adopted its Sandbox: labels and annotations as updatePodMetadata
    leaves them. Raises ValueError where the controller refuses the claim (a label override)."""
    extra = (claim["spec"].get("additionalPodMetadata") or {})
    meta = copy.deepcopy(template["spec"]["podTemplate"].get("metadata") or {})
    labels, annotations = dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})
    for k, v in (extra.get("labels") or {}).items():
        if k in labels and labels[k] != v:
            raise ValueError(f"metadata override conflict: label {k}")
        domain = k.split("/", 1)[0].lower() if "/" in k else ""
        if domain != "sandbox.users.io" and not domain.endswith(".sandbox.users.io"):
            raise ValueError(f"label {k} is not in the allowed domain sandbox.users.io")
        labels[k] = v
    annotations.update(extra.get("annotations") or {})
    out = copy.deepcopy(pod)
    pl = out["metadata"]["labels"]
    managed = sorted(k for k in labels if not _system(k))
    for k in managed:
        pl[k] = labels[k]
    pl.pop(WARM_POOL, None)          # the Sandbox's owner is now the claim, not the pool
    pl.pop(CREATED_BY, None)         # the claim carries no created-by label
    pa = out["metadata"]["annotations"]
    for k in (pa.get(PROPAGATED_ANNOTATIONS) or "").split(","):
        if k and k not in annotations:
            pa.pop(k, None)          # safe-to-evict: removed once the sandbox holds a tenant
    pa.update({k: v for k, v in annotations.items() if not _system(k)})
    pa[PROPAGATED_LABELS] = ",".join(managed)
    pa[PROPAGATED_ANNOTATIONS] = ",".join(sorted(k for k in annotations if not _system(k)))
    return out


def managed_default_policy(template, namespace="boxkite"):
    """The NetworkPolicy the controller creates for a Managed template with no policy of its own."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": template["metadata"]["name"] + "-network-policy", "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": {TEMPLATE_REF_HASH: name_hash(template["metadata"]["name"])}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "agent-sandbox-system"}},
                "podSelector": {"matchLabels": {"app": "sandbox-router"}}}]}],
            "egress": [{"to": [
                {"ipBlock": {"cidr": "0.0.0.0/0",
                             "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"]}},
                {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10"]}}]}],
        },
    }
