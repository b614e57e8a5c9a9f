"""2. The project's invariants (invariants.py) hold for every rendering of deploy/ and for bkctl
kube's output -- and each is shown able to fail, on a copy of the pod broken in that one way."""
import copy
import re
import unittest

import invariants
import k8skit


def renderings():
    """(what, objects) for the base, each kustomization, and bkctl kube."""
    out = [(str(d.relative_to(k8skit.REPO)), k8skit.docs(k8skit.render(d))) for d in k8skit.KUSTOMIZATIONS]
    out.append(("bkctl kube", k8skit.docs(k8skit.bkctl_kube("sb-inv"))))
    return out


class DeployHoldsTheInvariants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.renderings = renderings()
        cls.base = dict(cls.renderings)["deploy"]

    def test_every_object_passes_the_apiserver_semantics(self):
        for what, objs in self.renderings:
            for o in objs:
                with self.subTest(f"{what}: {o['kind']}/{o['metadata']['name']}"):
                    self.assertEqual(invariants.check_api_semantics(o), [])

    def test_every_sandbox_pod(self):
        pods = [(what, o) for what, objs in self.renderings for o in objs if o["kind"] == "Pod"]
        self.assertGreaterEqual(len(pods), 2, "the template and bkctl kube's pod at least")
        for what, pod in pods:
            with self.subTest(what):
                self.assertEqual(invariants.check_pod(pod), [])

    def test_the_policy_selects_the_pods_labels(self):
        """Against the labels the pods really carry: bkctl kube's, and the template's."""
        policies = [o for o in self.base if o["kind"] == "NetworkPolicy"]
        for what, objs in self.renderings:
            for pod in (o for o in objs if o["kind"] == "Pod"):
                with self.subTest(what):
                    self.assertEqual(invariants.check_network_policies(policies, pod), [])

    def test_namespaces(self):
        self.assertEqual(invariants.check_namespaces(self.base), [])

    def test_rbac(self):
        self.assertIn("Role", [o["kind"] for o in self.base])
        self.assertEqual(invariants.check_rbac(self.base), [])

    def test_the_permissive_policy_is_reachable_from_no_kustomization(self):
        permissive = k8skit.docs(k8skit.PERMISSIVE.read_text())
        self.assertIn("an egress rule to every destination",
                      " ".join(invariants.check_network_policies(permissive, self.pod())),
                      "control: the egress check refuses the permissive policy itself")
        for what, objs in self.renderings:
            with self.subTest(what):
                policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
                self.assertNotIn(permissive[0]["metadata"]["name"], {p["metadata"]["name"] for p in policies})
                self.assertEqual([b for b in invariants.check_network_policies(policies, self.pod())
                                  if "egress" in b], [])
        # And no kustomization names the file (a resource, component, patch: any string value).
        for k in k8skit.KUSTOMIZATION_FILES:
            with self.subTest(str(k.relative_to(k8skit.REPO))):
                self.assertNotIn(k8skit.PERMISSIVE.resolve(), set(strings_as_paths(
                    k8skit.yaml().safe_load(k.read_text()), k.parent)))

    def test_secret_is_fresh_and_well_formed(self):
        import base64
        secrets = []
        for _ in range(2):
            objs = k8skit.docs(k8skit.bkctl_kube("sb-fresh"))
            s = next(o for o in objs if o["kind"] == "Secret")
            self.assertEqual((s["type"], s.get("immutable")), ("Opaque", True))
            self.assertEqual(sorted(s["data"]), ["key", "tls.crt", "tls.key"])
            key = base64.b64decode(s["data"]["key"]).decode()
            self.assertRegex(key, r"(?m)^k1 [0-9a-f]{64}$")
            self.assertIn("-----BEGIN CERTIFICATE-----", base64.b64decode(s["data"]["tls.crt"]).decode())
            self.assertIn("-----BEGIN PRIVATE KEY-----", base64.b64decode(s["data"]["tls.key"]).decode())
            secrets.append(s["data"])
        self.assertNotEqual(secrets[0]["key"], secrets[1]["key"])
        self.assertNotEqual(secrets[0]["tls.key"], secrets[1]["tls.key"])

    def test_the_images_hold_what_the_pod_runs(self):
        """Each container's command is a file its image's build file copies in."""
        pod = self.pod()
        for name in ("sandbox", "sidecar"):
            with self.subTest(name):
                build = (k8skit.DEPLOY / "images" / f"{name}.Containerfile").read_text()
                copied = set(re.findall(r"(?m)^COPY \S+ (\S+)$", build))
                self.assertIn(k8skit.container(pod, name)["command"][0], copied)
                self.assertIn(k8skit.container(pod, name)["image"].split(":")[0], build)

    def pod(self):
        return k8skit.sandbox_pod(dict(self.renderings)["deploy/sandbox"])


def strings_as_paths(value, base):
    """Every string in a parsed YAML value, resolved as a path relative to base."""
    if isinstance(value, str):
        yield (base / value).resolve()
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_as_paths(v, base)
    elif isinstance(value, list):
        for v in value:
            yield from strings_as_paths(v, base)


def sidecar(p):
    return k8skit.container(p, "sidecar")


def sandbox(p):
    return k8skit.container(p, "sandbox")


# Each breaks the pod one way, and the violation the checks must report.
BREAKAGES = {
    "sandbox as root": (lambda p: sandbox(p)["securityContext"].update(runAsUser=0), r"runAsUser is 0"),
    "sandbox writable root": (lambda p: sandbox(p)["securityContext"].update(readOnlyRootFilesystem=False),
                              r"readOnlyRootFilesystem"),
    "sandbox may escalate": (lambda p: sandbox(p)["securityContext"].update(allowPrivilegeEscalation=True),
                             r"allowPrivilegeEscalation is True"),
    "sandbox keeps a capability": (lambda p: sandbox(p)["securityContext"]["capabilities"].update(add=["KILL"]),
                                   r"capabilities are not drop \[ALL\]"),
    "sandbox unconfined": (lambda p: sandbox(p)["securityContext"].update(seccompProfile={"type": "Unconfined"}),
                           r"seccomp profile is not RuntimeDefault"),
    "sandbox sees the Secret": (lambda p: sandbox(p)["volumeMounts"].append(
        {"name": "tls", "mountPath": "/etc/tls"}), r"mounts the Secret volume"),
    "sandbox gets the key": (lambda p: sandbox(p).update(env=sidecar(p)["env"]), r"has environment variables"),
    "no shared PID namespace": (lambda p: p["spec"].pop("shareProcessNamespace"), r"shareProcessNamespace"),
    "token mounted": (lambda p: p["spec"].update(automountServiceAccountToken=True), r"automountServiceAccountToken"),
    "host network": (lambda p: p["spec"].update(hostNetwork=True), r"hostNetwork is true"),
    "host path": (lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), r"hostPath"),
    "workspace unbounded": (lambda p: next(v for v in p["spec"]["volumes"] if v["name"] == "workspace")
                            ["emptyDir"].pop("sizeLimit"), r"/workspace is not an emptyDir with a sizeLimit"),
    "literal key": (lambda p: sidecar(p)["env"].__setitem__(0, {"name": "BOXKITE_KEY", "value": "k1 " + "ab" * 32}),
                    r"literal value"),
    "key from a shared Secret": (lambda p: sidecar(p)["env"][0]["valueFrom"]["secretKeyRef"].update(name="shared"),
                                 r"\(the pod's own\)"),
    "key from a file": (lambda p: sidecar(p)["args"].extend(["--key-file", "/k"]), r"--key-file"),
    "TLS from another Secret": (lambda p: next(v for v in p["spec"]["volumes"] if v["name"] == "tls")["secret"].update(
        secretName="other"), r"volume tls is Secret 'other'"),
    "no state directory": (lambda p: sidecar(p)["volumeMounts"].pop(), r"no emptyDir at the state directory"),
    "key in an annotation": (lambda p: p["metadata"].update(annotations={"k": "ab" * 32}), r"key-like"),
    "sidecar privileged": (lambda p: sidecar(p)["securityContext"].update(privileged=True), r"sidecar: privileged"),
    "sidecar keeps everything": (lambda p: sidecar(p)["securityContext"]["capabilities"].pop("drop"),
                                 r"do not drop ALL"),
    "NNP with SYS_ADMIN": (lambda p: sidecar(p)["securityContext"].update(allowPrivilegeEscalation=False),
                           r"apiserver refuses"),
    "sidecar not in pod mode": (lambda p: sidecar(p)["args"].remove("--pod"), r"--pod"),
    "no readiness probe": (lambda p: sidecar(p).pop("readinessProbe"), r"no readinessProbe"),
    "no memory limit": (lambda p: sandbox(p)["resources"]["limits"].pop("memory"), r"resources.limits.memory"),
    "label missing": (lambda p: p["metadata"]["labels"].pop("app.kubernetes.io/component"),
                      r"no label app.kubernetes.io/component"),
}

API_BREAKAGES = {
    "bad name": (lambda p: p["metadata"].update(name="Bad_Name"), r"not a DNS-1123 label"),
    "port out of range": (lambda p: sidecar(p)["ports"][0].update(containerPort=70000), r"out of range"),
    "probe names a missing port": (lambda p: sidecar(p)["readinessProbe"]["httpGet"].update(port="nope"),
                                   r"names port 'nope'"),
    "long port name": (lambda p: sidecar(p)["ports"][0].update(name="a-very-long-port-name"), r"IANA_SVC_NAME"),
}


class EachInvariantCanFail(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pod = k8skit.sandbox_pod(k8skit.docs(k8skit.render(k8skit.DEPLOY / "sandbox")))
        cls.policies = [o for o in k8skit.docs(k8skit.render(k8skit.DEPLOY)) if o["kind"] == "NetworkPolicy"]

    def test_pod_breakages(self):
        for what, (mutate, want) in BREAKAGES.items():
            with self.subTest(what):
                p = copy.deepcopy(self.pod)
                mutate(p)
                found = invariants.check_pod(p)
                self.assertTrue(any(re.search(want, b) for b in found), f"{want!r} not in {found}")

    def test_api_breakages(self):
        for what, (mutate, want) in API_BREAKAGES.items():
            with self.subTest(what):
                p = copy.deepcopy(self.pod)
                mutate(p)
                found = invariants.check_api_semantics(p)
                self.assertTrue(any(re.search(want, b) for b in found), f"{want!r} not in {found}")

    def test_policy_selecting_a_label_nothing_carries(self):
        pols = copy.deepcopy(self.policies)
        pols[0]["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] = "execution"
        self.assertTrue(invariants.check_network_policies(pols, self.pod))

    def test_open_egress_cidr(self):
        for cidr in ("0.0.0.0/0", "::/0"):
            with self.subTest(cidr):
                pols = copy.deepcopy(self.policies)
                pols[0]["spec"]["egress"][-1]["to"] = [{"ipBlock": {"cidr": cidr}}]
                found = invariants.check_network_policies(pols, self.pod)
                self.assertIn(f"NetworkPolicy/{pols[0]['metadata']['name']}: egress to {cidr}", found)

    def test_namespaces_can_fail(self):
        base = k8skit.docs(k8skit.render(k8skit.DEPLOY))
        for what, mutate, want in [
            ("a namespaced object without one", lambda o: o["NetworkPolicy"]["metadata"].pop("namespace"),
             "NetworkPolicy/boxkite-sandbox-egress: in namespace None"),
            ("a policy with one", lambda o: o["ValidatingAdmissionPolicy"]["metadata"].update(namespace="boxkite"),
             "cluster-scoped, but names namespace boxkite"),
            ("a subject elsewhere", lambda o: o["RoleBinding"]["subjects"][0].update(namespace="default"),
             "subject boxkite-orchestrator in namespace 'default'"),
            ("a binding for every namespace", lambda o: o["ValidatingAdmissionPolicyBinding"]["spec"].pop(
                "matchResources"), "selects namespaces {}"),
        ]:
            with self.subTest(what):
                objs = copy.deepcopy(base)
                mutate({o["kind"]: o for o in objs})
                self.assertTrue(any(want in b for b in invariants.check_namespaces(objs)),
                                invariants.check_namespaces(objs))

    def test_cluster_role(self):
        self.assertTrue(invariants.check_rbac([{"kind": "ClusterRole", "metadata": {"name": "x"}, "rules": []}]))
        self.assertTrue(invariants.check_rbac([{"kind": "Role", "metadata": {"name": "x"}, "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/exec"], "verbs": ["create"]}]}]))
        self.assertTrue(invariants.check_rbac([{"kind": "Role", "metadata": {"name": "x"}, "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]}]))
        for resource in ("sandboxtemplates", "sandboxwarmpools"):
            with self.subTest(resource):
                self.assertTrue(invariants.check_rbac([{"kind": "Role", "metadata": {"name": "x"}, "rules": [
                    {"apiGroups": ["extensions.agents.x-k8s.io"], "resources": ["sandboxclaims", resource],
                     "verbs": ["create"]}]}]))
        self.assertTrue(invariants.check_rbac([{"kind": "Role", "metadata": {"name": "x"}, "rules": [
            {"apiGroups": ["", "apps"], "resources": ["pods"], "verbs": ["create"]}]}]))
        self.assertTrue(invariants.check_rbac([{"kind": "Role", "metadata": {"name": "x"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}]}]))


if __name__ == "__main__":
    unittest.main()
