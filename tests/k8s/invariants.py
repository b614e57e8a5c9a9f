"""The project's invariants over deploy/'s rendered objects, and the apiserver's own checks that
the schemas cannot express (selector vs. labels, port names, DNS-1123 names, the
allowPrivilegeEscalation/SYS_ADMIN rule). Each check returns a list of violations, as
"where: what" strings; test_2_invariants.py runs them on deploy/ and on broken copies of it.
"""
import ipaddress
import re

SANDBOX_UID = 1001
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$")
KEY_LIKE = re.compile(r"[0-9a-fA-F]{64}")
REQUIRED_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/component", "app.kubernetes.io/part-of")
# The Secret a warm pool's pods share: the claim key and the pool's TLS certificate.
POOL_SECRET = "boxkite-pool"
OPEN_CIDRS = {ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")}


def _sc(container):
    return container.get("securityContext") or {}


def _seccomp(pod, container):
    return (_sc(container).get("seccompProfile") or (pod["spec"].get("securityContext") or {})
            .get("seccompProfile") or {}).get("type")


def containers(pod):
    return {c["name"]: c for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])}


def check_pod(pod):
    """A boxkite sandbox pod: the security contexts, the key's path, the volumes, the probes.

    Two kinds: a pod of its own (bkctl kube: its key from its own Secret by --key-env, labelled
    app.kubernetes.io/instance with its name) and a warm pool's pod (agent-sandbox's controller
    names it: the pool's claim key from Secret boxkite-pool by --claim-key-env)."""
    bad = []
    spec, name = pod["spec"], pod["metadata"]["name"]
    where = f"Pod/{name}"
    labels = pod["metadata"].get("labels") or {}
    sidecar_args = next((c.get("args") or [] for c in spec.get("containers", []) if c.get("name") == "sidecar"), [])
    pooled = "--claim-key-env" in sidecar_args
    for k in REQUIRED_LABELS:
        if k not in labels:
            bad.append(f"{where}: no label {k}")
    if not pooled and labels.get("app.kubernetes.io/instance") != name:
        bad.append(f"{where}: app.kubernetes.io/instance is not the pod's name")
    if spec.get("shareProcessNamespace") is not True:
        bad.append(f"{where}: shareProcessNamespace is not true (pod mode finds the sandbox's init by it)")
    if spec.get("automountServiceAccountToken") is not False:
        bad.append(f"{where}: automountServiceAccountToken is not false")
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(f) is True:
            bad.append(f"{where}: {f} is true")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for v in volumes.values():
        if "hostPath" in v:
            bad.append(f"{where}: volume {v['name']} is a hostPath")
    cs = containers(pod)
    if set(cs) != {"sandbox", "sidecar"}:
        return bad + [f"{where}: containers are {sorted(cs)}, not sandbox and sidecar"]
    sandbox, sidecar = cs["sandbox"], cs["sidecar"]

    # The sandbox container: what sandboxed code runs with.
    w = f"{where} container sandbox"
    sc = _sc(sandbox)
    want = {"runAsUser": SANDBOX_UID, "runAsGroup": SANDBOX_UID, "runAsNonRoot": True,
            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
    for k, v in want.items():
        if sc.get(k) != v:
            bad.append(f"{w}: securityContext.{k} is {sc.get(k)!r}, not {v!r}")
    if sc.get("privileged"):
        bad.append(f"{w}: privileged")
    caps = sc.get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or caps.get("add"):
        bad.append(f"{w}: capabilities are not drop [ALL] with nothing added")
    if _seccomp(pod, sandbox) != "RuntimeDefault":
        bad.append(f"{w}: seccomp profile is not RuntimeDefault")
    if not (sandbox.get("command") or [""])[0].endswith("/boxkite-init"):
        bad.append(f"{w}: does not run boxkite-init (pod mode finds the sandbox by that name)")
    mounts = {m["mountPath"]: m for m in sandbox.get("volumeMounts", [])}
    for path in ("/workspace", "/tmp", "/home/sandbox"):
        m = mounts.get(path)
        v = volumes.get(m["name"]) if m else None
        if not v or "emptyDir" not in v or not (v["emptyDir"] or {}).get("sizeLimit"):
            bad.append(f"{w}: {path} is not an emptyDir with a sizeLimit")
    for m in sandbox.get("volumeMounts", []):
        if "secret" in volumes.get(m["name"], {}):
            bad.append(f"{w}: mounts the Secret volume {m['name']}")
    if sandbox.get("env") or sandbox.get("envFrom"):
        bad.append(f"{w}: has environment variables (nothing of the sidecar's may reach it)")

    # The sidecar: root with a short list, the key only through secretKeyRef.
    w = f"{where} container sidecar"
    sc = _sc(sidecar)
    caps = sc.get("capabilities") or {}
    if sc.get("privileged"):
        bad.append(f"{w}: privileged")
    if caps.get("drop") != ["ALL"]:
        bad.append(f"{w}: capabilities do not drop ALL")
    if sc.get("readOnlyRootFilesystem") is not True:
        bad.append(f"{w}: readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation") is False and "SYS_ADMIN" in (caps.get("add") or []):
        bad.append(f"{w}: allowPrivilegeEscalation false with SYS_ADMIN added: the apiserver refuses it")
    args = sidecar.get("args") or []
    if "--pod" not in args:
        bad.append(f"{w}: boxkited is not in pod mode (--pod)")
    for opt in ("--key-file", "--claim-key-file"):
        if opt in args:
            bad.append(f"{w}: {opt}: the key comes from a Secret by secretKeyRef (--key-env, --claim-key-env)")
    if "--key-env" in args and pooled:
        bad.append(f"{w}: both --key-env and --claim-key-env")
    option, secret = ("--claim-key-env", POOL_SECRET) if pooled else ("--key-env", name)
    key_env = args[args.index(option) + 1] if option in args[:-1] else None
    env = {e["name"]: e for e in sidecar.get("env", [])}
    ref = ((env.get(key_env) or {}).get("valueFrom") or {}).get("secretKeyRef")
    if not key_env or not ref:
        bad.append(f"{w}: the key is not an environment variable from a secretKeyRef ({option})")
    elif ref.get("name") != secret:
        bad.append(f"{w}: the key's secretKeyRef names Secret {ref.get('name')!r}, not {secret!r}"
                   f" ({'the pool' if pooled else 'the pod'}'s own)")
    for v in volumes.values():
        if "secret" in v and v["secret"].get("secretName") != secret:
            bad.append(f"{where}: volume {v['name']} is Secret {v['secret'].get('secretName')!r}, not {secret!r}")
    state_dir = args[args.index("--state-dir") + 1] if "--state-dir" in args[:-1] else "/var/lib/boxkite"
    state = next((m for m in sidecar.get("volumeMounts", []) if m["mountPath"] == state_dir), None)
    if not state or "emptyDir" not in volumes.get(state["name"], {}):
        bad.append(f"{w}: no emptyDir at the state directory {state_dir} (the replay log; a pool pod's claim)")
    for e in env.values():
        if "value" in e:
            bad.append(f"{w}: env {e['name']} has a literal value")
    if sidecar.get("envFrom"):
        bad.append(f"{w}: envFrom (every key of a Secret or ConfigMap, unlisted)")
    for k, v in (pod["metadata"].get("annotations") or {}).items():
        if KEY_LIKE.search(str(v)):
            bad.append(f"{where}: annotation {k} holds something key-like")
    for probe in ("readinessProbe", "livenessProbe"):
        if not sidecar.get(probe):
            bad.append(f"{w}: no {probe}")
    for c in (sandbox, sidecar):
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            for r in ("cpu", "memory"):
                if r not in (res.get(kind) or {}):
                    bad.append(f"{where} container {c['name']}: no resources.{kind}.{r}")
    return bad


def check_api_semantics(obj):
    """What the apiserver validates beyond the schema, for the kinds deploy/ uses."""
    bad = []
    kind, meta = obj["kind"], obj.get("metadata") or {}
    where = f"{kind}/{meta.get('name')}"
    if not DNS1123_LABEL.match(meta.get("name") or ""):
        bad.append(f"{where}: name is not a DNS-1123 label")
    if kind == "Pod":
        names = set()
        for c in containers(obj).values():
            for p in c.get("ports", []):
                if not 0 < p["containerPort"] < 65536:
                    bad.append(f"{where} container {c['name']}: port {p['containerPort']} out of range")
                if "name" in p:
                    if not PORT_NAME.match(p["name"]):
                        bad.append(f"{where} container {c['name']}: port name {p['name']!r} is not IANA_SVC_NAME")
                    if p["name"] in names:
                        bad.append(f"{where}: port name {p['name']} used twice")
                    names.add(p["name"])
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
                if isinstance(port, str) and port not in {p.get("name") for p in c.get("ports", [])}:
                    bad.append(f"{where} container {c['name']}: {probe} names port {port!r} it does not have")
    if kind == "NetworkPolicy":
        for section in ("ingress", "egress"):
            for rule in obj["spec"].get(section) or []:
                for peer in rule.get("from", []) + rule.get("to", []):
                    if "ipBlock" in peer:
                        try:
                            net = ipaddress.ip_network(peer["ipBlock"]["cidr"])
                            for e in peer["ipBlock"].get("except") or []:
                                if not ipaddress.ip_network(e).subnet_of(net):
                                    bad.append(f"{where}: except {e} is not inside {net}")
                        except ValueError as e:
                            bad.append(f"{where}: {e}")
                        if len(peer) > 1:
                            bad.append(f"{where}: ipBlock with another selector in one peer")
                for p in rule.get("ports") or []:
                    if p.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
                        bad.append(f"{where}: protocol {p['protocol']}")
                    if isinstance(p.get("port"), int) and not 0 < p["port"] < 65536:
                        bad.append(f"{where}: port {p['port']} out of range")
                    if "endPort" in p and not isinstance(p.get("port"), int):
                        bad.append(f"{where}: endPort with a named port")
    return bad


def check_network_policies(policies, pod):
    """The base's policies: one default-deny for both directions that selects the pod's real
    labels, no open egress."""
    from netpol import policy_types, selects
    bad = []
    selecting = [p for p in policies if selects(p["spec"].get("podSelector"), pod["metadata"]["labels"])]
    if not any(policy_types(p) == {"Ingress", "Egress"} for p in selecting):
        bad.append(f"no NetworkPolicy isolating both directions selects Pod/{pod['metadata']['name']}'s labels")
    for p in policies:
        where = f"NetworkPolicy/{p['metadata']['name']}"
        if p["spec"].get("podSelector") == {}:
            bad.append(f"{where}: selects every pod of the namespace")
        for rule in p["spec"].get("egress") or []:
            if not rule.get("to"):
                bad.append(f"{where}: an egress rule to every destination")
            for peer in rule.get("to") or []:
                cidr = (peer.get("ipBlock") or {}).get("cidr")
                if cidr and ipaddress.ip_network(cidr) in OPEN_CIDRS:
                    bad.append(f"{where}: egress to {cidr}")
    return bad


# What the orchestrator's Role may name: pods and secrets, and agent-sandbox's claims -- never
# its templates or pools (what a pool's pods look like is the operator's), nor ConfigMaps (the
# admission guard's parameters).
ORCHESTRATOR_RESOURCES = {("", "pods"), ("", "secrets"), ("extensions.agents.x-k8s.io", "sandboxclaims")}


def check_rbac(objects):
    """The orchestrator's RBAC: a namespaced Role over pods, secrets and sandbox claims, nothing
    else."""
    bad = []
    for o in objects:
        where = f"{o['kind']}/{o['metadata']['name']}"
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            bad.append(f"{where}: cluster-wide")
        if o["kind"] == "Role":
            for r in o.get("rules", []):
                named = {(g, res) for g in r.get("apiGroups", []) for res in r.get("resources", [])}
                if not named <= ORCHESTRATOR_RESOURCES:
                    bad.append(f"{where}: a rule beyond pods, secrets and sandboxclaims: {r}")
                if "*" in r.get("verbs", []) + r.get("resources", []) + r.get("apiGroups", []):
                    bad.append(f"{where}: a wildcard")
        if o["kind"] == "RoleBinding":
            for s in o.get("subjects", []):
                if s.get("kind") != "ServiceAccount" or s.get("namespace") != o["metadata"].get("namespace"):
                    bad.append(f"{where}: subject {s} is not a ServiceAccount of its namespace")
    return bad


CLUSTER_SCOPED = {"Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole",
                  "ClusterRoleBinding"}


def check_namespaces(objects):
    """The base has no namespace transformer (it would put one on the cluster-scoped admission
    objects): each namespaced object names the base's Namespace itself, the cluster-scoped ones
    none, and the admission policy's binding selects that namespace."""
    bad = []
    names = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    if len(names) != 1:
        return [f"expected one Namespace, found {names}"]
    ns = names[0]
    for o in objects:
        where, got = f"{o['kind']}/{o['metadata']['name']}", o["metadata"].get("namespace")
        if o["kind"] in CLUSTER_SCOPED and got is not None:
            bad.append(f"{where}: cluster-scoped, but names namespace {got}")
        if o["kind"] not in CLUSTER_SCOPED and got != ns:
            bad.append(f"{where}: in namespace {got!r}, not {ns!r}")
        if o["kind"] == "RoleBinding":
            for s in o.get("subjects", []):
                if s.get("namespace") != ns:
                    bad.append(f"{where}: subject {s.get('name')} in namespace {s.get('namespace')!r}, not {ns!r}")
        if o["kind"] == "ValidatingAdmissionPolicyBinding":
            selector = ((o["spec"].get("matchResources") or {}).get("namespaceSelector") or {}).get("matchLabels") or {}
            if selector != {"kubernetes.io/metadata.name": ns}:
                bad.append(f"{where}: selects namespaces {selector}, not exactly {ns!r}")
    return bad
