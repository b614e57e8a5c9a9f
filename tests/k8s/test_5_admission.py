"""5. The admission guard (deploy/admission-policy.yaml), run offline by a CEL evaluator
(admission.mjs, npm @bufbuild/cel, standard CEL only) as the apiserver would run it:

  * the real pods are admitted: bkctl kube's, deploy/sandbox's, and the pods agent-sandbox's
    controller makes of deploy/agent-sandbox (warm, and updated when claimed);
  * each unsafe variant of them is refused, by exactly the rule meant to refuse it, and every
    rule of the policy refuses at least one variant (a rule no variant trips proves nothing);
  * the evaluator itself: a Kubernetes-library function, iterating an object, an absent field
    -- each fails here as it would on the apiserver, so a pass means the policy is standard CEL.
"""
import copy
import unittest

import agent_sandbox
import k8skit

# Each validation of the policy, by a name the variants use, and a piece of its message.
RULES = {
    "labels": "carries the labels the NetworkPolicy selects",
    "host-namespaces": "no host namespace",
    "volumes": "volumes are emptyDir or secret only",
    "token": "automountServiceAccountToken is false",
    "service-account": "default service account",
    "sysctls": "no sysctls",
    "containers": "the containers are exactly sandbox and sidecar",
    "init": "no init containers",
    "ephemeral": "no ephemeral (debug) containers",
    "privileged": "no privileged container",
    "host-port": "no hostPort",
    "seccomp": "seccomp profile is RuntimeDefault or Localhost",
    "proc-mount": "procMount is Default",
    "selinux": "no SELinux user, role or type",
    "sandbox-uid": "runs as uid and gid 1001",
    "sandbox-non-root": "runAsNonRoot true",
    "sandbox-escalation": "allowPrivilegeEscalation false",
    "sandbox-read-only": "root filesystem is read-only",
    "sandbox-capabilities": "the sandbox container drops ALL capabilities and adds none",
    "sandbox-apparmor": "keeps an AppArmor profile",
    "sandbox-env": "the sandbox container has no environment variables",
    "sandbox-mounts": "mounts emptyDir volumes only",
    "sidecar-capabilities": "the sidecar drops ALL capabilities and adds only its proven list",
    "sidecar-image": "the sidecar's image is one the boxkite-admission ConfigMap names",
    "sidecar-command": "the sidecar runs /usr/sbin/boxkited",
    "sidecar-env": "the sidecar's environment is BOXKITE_* and AWS_*",
    "sidecar-hooks": "no lifecycle hook or exec probe",
    "sidecar-shares": "the sidecar shares no volume with the sandbox container",
}


def spec(p):
    return p["spec"]


def sandbox(p):
    return k8skit.container(p, "sandbox")


def sidecar(p):
    return k8skit.container(p, "sidecar")


def ctx(c):
    return c.setdefault("securityContext", {})


def add_volume(p, volume, into=None, path="/host"):
    p["spec"]["volumes"].append(volume)
    if into:
        k8skit.container(p, into)["volumeMounts"].append({"name": volume["name"], "mountPath": path})


# name: (mutation of the pod, the rules that must refuse it -- exactly those)
VARIANTS = {
    "hostNetwork": (lambda p: spec(p).update(hostNetwork=True), {"host-namespaces"}),
    "hostPID": (lambda p: spec(p).update(hostPID=True), {"host-namespaces"}),
    "hostIPC": (lambda p: spec(p).update(hostIPC=True), {"host-namespaces"}),
    "a hostPath of / in the sidecar": (
        lambda p: add_volume(p, {"name": "host", "hostPath": {"path": "/"}}, "sidecar"), {"volumes"}),
    "a hostPath of / in the sandbox": (
        lambda p: add_volume(p, {"name": "host", "hostPath": {"path": "/"}}, "sandbox"),
        {"volumes", "sandbox-mounts"}),
    "a projected service-account token": (
        lambda p: add_volume(p, {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                             "sidecar", "/var/run/secrets/kubernetes.io/serviceaccount"), {"volumes"}),
    "an NFS volume": (lambda p: add_volume(p, {"name": "n", "nfs": {"server": "192.0.2.1", "path": "/"}}, "sidecar"),
                      {"volumes"}),
    "a hostPort": (lambda p: sidecar(p)["ports"][0].update(hostPort=8443), {"host-port"}),
    "a privileged sidecar": (lambda p: ctx(sidecar(p)).update(privileged=True), {"privileged"}),
    "a privileged sandbox container": (lambda p: ctx(sandbox(p)).update(privileged=True), {"privileged"}),
    "an init container": (lambda p: spec(p).update(initContainers=[{"name": "i", "image": "busybox"}]), {"init"}),
    "a privileged init container": (
        lambda p: spec(p).update(initContainers=[{"name": "i", "image": "busybox",
                                                  "securityContext": {"privileged": True}}]), {"init", "privileged"}),
    "a third container": (lambda p: spec(p)["containers"].append({"name": "extra", "image": "busybox"}),
                          {"containers"}),
    "the sidecar adds SYS_MODULE": (
        lambda p: ctx(sidecar(p))["capabilities"]["add"].append("SYS_MODULE"), {"sidecar-capabilities"}),
    "the sidecar keeps the runtime's default capabilities": (
        lambda p: ctx(sidecar(p))["capabilities"].pop("drop"), {"sidecar-capabilities"}),
    "the sandbox as uid 0": (lambda p: ctx(sandbox(p)).update(runAsUser=0), {"sandbox-uid"}),
    "the sandbox in group 0": (lambda p: ctx(sandbox(p)).update(runAsGroup=0), {"sandbox-uid"}),
    "the sandbox's user left to the image": (lambda p: ctx(sandbox(p)).pop("runAsUser"), {"sandbox-uid"}),
    "the sandbox may run as root": (lambda p: ctx(sandbox(p)).update(runAsNonRoot=False), {"sandbox-non-root"}),
    "the sandbox may escalate": (lambda p: ctx(sandbox(p)).update(allowPrivilegeEscalation=True),
                                 {"sandbox-escalation"}),
    "the sandbox's root writable": (lambda p: ctx(sandbox(p)).update(readOnlyRootFilesystem=False),
                                    {"sandbox-read-only"}),
    "the sandbox adds NET_RAW": (lambda p: ctx(sandbox(p))["capabilities"].update(add=["NET_RAW"]),
                                 {"sandbox-capabilities"}),
    "the sandbox drops nothing": (lambda p: ctx(sandbox(p)).pop("capabilities"), {"sandbox-capabilities"}),
    "the sandbox unconfined by seccomp": (
        lambda p: ctx(sandbox(p)).update(seccompProfile={"type": "Unconfined"}), {"seccomp"}),
    "no seccomp profile for the sandbox anywhere": (
        lambda p: (ctx(sandbox(p)).pop("seccompProfile"), spec(p).pop("securityContext")), {"seccomp"}),
    "the sidecar unconfined by seccomp": (
        lambda p: ctx(sidecar(p)).update(seccompProfile={"type": "Unconfined"}), {"seccomp"}),
    "an unmasked /proc": (lambda p: ctx(sidecar(p)).update(procMount="Unmasked"), {"proc-mount"}),
    "SELinux type spc_t": (lambda p: ctx(sidecar(p)).update(seLinuxOptions={"type": "spc_t"}), {"selinux"}),
    "SELinux user at pod level": (lambda p: spec(p)["securityContext"].update(seLinuxOptions={"user": "system_u"}),
                                  {"selinux"}),
    "the sandbox unconfined by AppArmor": (
        lambda p: ctx(sandbox(p)).update(appArmorProfile={"type": "Unconfined"}), {"sandbox-apparmor"}),
    "the pod unconfined by AppArmor": (
        lambda p: spec(p)["securityContext"].update(appArmorProfile={"type": "Unconfined"}), {"sandbox-apparmor"}),
    "the sandbox unconfined by the AppArmor annotation": (
        lambda p: p["metadata"].setdefault("annotations", {}).update(
            {"container.apparmor.security.beta.kubernetes.io/sandbox": "unconfined"}), {"sandbox-apparmor"}),
    "a service-account token": (lambda p: spec(p).update(automountServiceAccountToken=True), {"token"}),
    "the token left to the service account": (lambda p: spec(p).pop("automountServiceAccountToken"), {"token"}),
    "another service account": (lambda p: spec(p).update(serviceAccountName="boxkite-orchestrator"),
                                {"service-account"}),
    "a sysctl": (lambda p: spec(p)["securityContext"].update(sysctls=[{"name": "net.ipv4.ip_forward", "value": "1"}]),
                 {"sysctls"}),
    "the sidecar from another image": (lambda p: sidecar(p).update(image="attacker/sidecar:latest"),
                                       {"sidecar-image"}),
    "a shell in the sidecar": (lambda p: sidecar(p).update(command=["/bin/sh", "-c", "id"]), {"sidecar-command"}),
    "boxkited with --executor": (
        lambda p: sidecar(p)["args"].extend(["--executor", "/etc/boxkite/tls/tls.key"]), {"sidecar-command"}),
    "boxkited with --executor=": (lambda p: sidecar(p)["args"].append("--executor=/x"), {"sidecar-command"}),
    "boxkited with an abbreviated --executor": (lambda p: sidecar(p)["args"].extend(["--executo", "/x"]),
                                                {"sidecar-command"}),
    "boxkited running commands as root": (lambda p: sidecar(p)["args"].extend(["--sandbox-uid", "0"]),
                                          {"sidecar-command"}),
    "boxkited with an egress proxy of its choosing": (lambda p: sidecar(p)["args"].extend(["--egress", "/bin/sh"]),
                                                     {"sidecar-command"}),
    "boxkited with --egress=": (lambda p: sidecar(p)["args"].append("--egress=/bin/sh"), {"sidecar-command"}),
    "boxkited running its egress proxy as root": (lambda p: sidecar(p)["args"].extend(["--egress-uid", "0"]),
                                                  {"sidecar-command"}),
    "LD_PRELOAD from a Secret in the sidecar": (
        lambda p: sidecar(p)["env"].append({"name": "LD_PRELOAD", "valueFrom": {
            "secretKeyRef": {"name": "x", "key": "k"}}}), {"sidecar-env"}),
    "a literal BOXKITE_ variable in the sidecar": (
        lambda p: sidecar(p)["env"].append({"name": "BOXKITE_X", "value": "1"}), {"sidecar-env"}),
    "envFrom in the sidecar": (lambda p: sidecar(p).update(envFrom=[{"secretRef": {"name": "x"}}]), {"sidecar-env"}),
    "a postStart hook in the sidecar": (
        lambda p: sidecar(p).update(lifecycle={"postStart": {"exec": {"command": ["/bin/sh"]}}}), {"sidecar-hooks"}),
    "an exec liveness probe in the sidecar": (
        lambda p: sidecar(p).update(livenessProbe={"exec": {"command": ["/bin/sh", "-c", "id"]}}), {"sidecar-hooks"}),
    "the sidecar mounts the workspace": (
        lambda p: sidecar(p)["volumeMounts"].append({"name": "workspace", "mountPath": "/w"}), {"sidecar-shares"}),
    "the key in the sandbox's environment": (lambda p: sandbox(p).update(env=copy.deepcopy(sidecar(p)["env"])),
                                             {"sandbox-env"}),
    "the Secret mounted in the sandbox": (
        lambda p: sandbox(p)["volumeMounts"].append({"name": "tls", "mountPath": "/etc/tls"}),
        {"sandbox-mounts", "sidecar-shares"}),
    "a pod the NetworkPolicy does not select": (
        lambda p: p["metadata"]["labels"].update({"app.kubernetes.io/component": "other"}), {"labels"}),
    "a pod with no labels": (lambda p: p["metadata"].pop("labels"), {"labels"}),
}


class Admission(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = k8skit.docs(k8skit.render(k8skit.DEPLOY))
        cls.policy = k8skit.one(cls.base, "ValidatingAdmissionPolicy")
        cls.kube_pod = k8skit.sandbox_pod(k8skit.docs(k8skit.bkctl_kube("sb-adm")))
        pool = k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX))
        cls.template, cls.pool = k8skit.one(pool, "SandboxTemplate"), k8skit.one(pool, "SandboxWarmPool")
        claim = k8skit.one(k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX / "claim")), "SandboxClaim")
        cls.warm = agent_sandbox.warm_pod(cls.template, cls.pool, "boxkite-x7k2p")
        cls.claimed = agent_sandbox.claimed_pod(cls.warm, cls.template, claim)

    def failed_rules(self, answer):
        """The rule names of an answer's failures; an expression that errs fails the test."""
        errors = [f for f in answer["failures"] if "error" in f]
        self.assertEqual(errors, [], "an expression did not evaluate: the rule is broken, not the pod")
        self.assertEqual(answer["variableErrors"], [])
        return {name for name, piece in RULES.items() for f in answer["failures"] if piece in f["message"]}

    def test_rules_are_the_policys_validations(self):
        """RULES names each validation once: none unnamed, none named twice."""
        messages = [v["message"] for v in self.policy["spec"]["validations"]]
        for name, piece in RULES.items():
            with self.subTest(name):
                self.assertEqual(len([m for m in messages if piece in m]), 1, piece)
        self.assertEqual(len(messages), len(RULES))

    def test_the_real_pods_are_admitted(self):
        pods = {
            "bkctl kube": self.kube_pod,
            "deploy/sandbox": k8skit.sandbox_pod(k8skit.docs(k8skit.render(k8skit.DEPLOY / "sandbox"))),
            "agent-sandbox's warm pod": self.warm,
        }
        for d in k8skit.KUSTOMIZATIONS:
            if d.parent.name == "overlays":
                objs = k8skit.docs(k8skit.render(d))
                for o in objs:
                    if o["kind"] == "Pod":
                        pods[f"{d.relative_to(k8skit.REPO)}"] = o
                    elif o["kind"] == "SandboxTemplate":
                        pods[f"{d.relative_to(k8skit.REPO)}: warm pod"] = agent_sandbox.warm_pod(
                            o, self.pool, "boxkite-r4nd0")
        cases = [{"name": what, "object": pod} for what, pod in pods.items()]
        cases.append({"name": "the claim's update of the warm pod", "operation": "UPDATE", "object": self.claimed,
                      "oldObject": self.warm})
        answers = k8skit.admission(self.base, cases)
        for c in cases:
            with self.subTest(c["name"]):
                a = answers[c["name"]]
                self.assertTrue(a["matched"], "the policy does not even look at it")
                self.assertEqual(a["failures"], [])
                self.assertTrue(a["admitted"])

    def test_every_unsafe_variant_is_refused_by_its_rule(self):
        self.assertGreaterEqual(len(VARIANTS), 20)
        cases = []
        for what, (mutate, _) in VARIANTS.items():
            pod = copy.deepcopy(self.kube_pod)
            mutate(pod)
            cases.append({"name": what, "object": pod})
        answers = k8skit.admission(self.base, cases)
        for what, (_, rules) in VARIANTS.items():
            with self.subTest(what):
                a = answers[what]
                self.assertFalse(a["admitted"], f"{what} was admitted")
                self.assertEqual(self.failed_rules(a), rules, a["failures"])

    def test_every_rule_refuses_a_variant(self):
        tripped = set().union(*(rules for _, rules in VARIANTS.values())) | {"ephemeral"}
        self.assertEqual(set(RULES) - tripped, set(), "rules no variant shows able to refuse")

    def test_a_debug_container_is_refused(self):
        """kubectl debug: an UPDATE of the pods/ephemeralcontainers subresource of a running pod."""
        debug = copy.deepcopy(self.claimed)
        debug["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox", "targetContainerName": "sidecar",
                                                 "securityContext": {"privileged": True}}]
        a = k8skit.admission(self.base, [{"name": "debug", "operation": "UPDATE", "subResource": "ephemeralcontainers",
                                          "object": debug, "oldObject": self.claimed}])["debug"]
        self.assertTrue(a["matched"])
        self.assertEqual(self.failed_rules(a), {"ephemeral"})

    def test_updates_are_checked(self):
        """A claim's relabelling, `kubectl set image`: pod UPDATEs are held to the same shape."""
        relabelled = copy.deepcopy(self.claimed)
        relabelled["metadata"]["labels"]["app.kubernetes.io/component"] = "released"
        reimaged = copy.deepcopy(self.claimed)
        k8skit.container(reimaged, "sidecar")["image"] = "attacker/sidecar:1"
        answers = k8skit.admission(self.base, [
            {"name": "relabel", "operation": "UPDATE", "object": relabelled, "oldObject": self.claimed},
            {"name": "set image", "operation": "UPDATE", "object": reimaged, "oldObject": self.claimed}])
        self.assertEqual(self.failed_rules(answers["relabel"]), {"labels"})
        self.assertEqual(self.failed_rules(answers["set image"]), {"sidecar-image"})

    def test_the_sidecar_image_comes_from_the_parameters(self):
        params = k8skit.one(self.base, "ConfigMap")
        other = copy.deepcopy(params)
        other["data"] = {"sidecarImage": "registry.example/boxkite/sidecar@sha256:" + "0" * 64}
        rollout = copy.deepcopy(other)
        rollout["data"]["sidecarImage.previous"] = params["data"]["sidecarImage"]
        self.assertEqual(self.failed_rules(k8skit.admission(
            self.base, [{"name": "p", "object": self.kube_pod}], params=other)["p"]), {"sidecar-image"})
        self.assertTrue(k8skit.admission(self.base, [{"name": "p", "object": self.kube_pod}],
                                         params=rollout)["p"]["admitted"])

    def test_it_denies_and_fails_closed(self):
        """Deny, not warn or audit; an expression that errs, or a missing parameter, refuses."""
        binding = k8skit.one(self.base, "ValidatingAdmissionPolicyBinding")
        self.assertEqual(self.policy["spec"]["failurePolicy"], "Fail")
        self.assertEqual(binding["spec"]["validationActions"], ["Deny"])
        self.assertEqual(binding["spec"]["policyName"], self.policy["metadata"]["name"])
        self.assertEqual(binding["spec"]["paramRef"]["parameterNotFoundAction"], "Deny")
        self.assertNotIn("namespace", binding["spec"]["paramRef"], "the parameters of the pod's own namespace")
        rules = self.policy["spec"]["matchConstraints"]["resourceRules"]
        self.assertEqual([(r["operations"], r["resources"]) for r in rules],
                         [(["CREATE", "UPDATE"], ["pods", "pods/ephemeralcontainers"])])

    def test_only_the_namespace_is_guarded(self):
        """The binding selects the boxkite namespace; elsewhere this policy does not apply."""
        pod = copy.deepcopy(self.kube_pod)
        pod["metadata"]["namespace"] = "default"
        pod["spec"]["hostPID"] = True
        a = k8skit.admission(self.base, [{"name": "elsewhere", "object": pod}])["elsewhere"]
        self.assertFalse(a["matched"])


class Evaluator(unittest.TestCase):
    """admission.mjs runs standard CEL as the apiserver does, and says so when it cannot."""

    @classmethod
    def setUpClass(cls):
        cls.pod = k8skit.sandbox_pod(k8skit.docs(k8skit.render(k8skit.DEPLOY / "sandbox")))

    def run_expression(self, expression):
        base = k8skit.docs(k8skit.render(k8skit.DEPLOY))
        base = [copy.deepcopy(o) for o in base]
        policy = k8skit.one(base, "ValidatingAdmissionPolicy")
        policy["spec"]["validations"] = [{"expression": expression, "message": "m"}]
        return k8skit.admission(base, [{"name": "x", "object": self.pod}])["x"]

    def test_true_and_false(self):
        self.assertTrue(self.run_expression("object.spec.shareProcessNamespace")["admitted"])
        a = self.run_expression("object.spec.containers.all(c, c.name == 'sandbox')")
        self.assertEqual(a["failures"], [{"index": 0, "message": "m"}])

    def test_integers_are_ints(self):
        self.assertTrue(self.run_expression(
            "object.spec.containers.exists(c, c.securityContext.runAsUser == 1001 && type(c.securityContext.runAsUser) == int)")
            ["admitted"])

    def test_an_absent_field_is_an_error(self):
        self.assertIn("error", self.run_expression("object.spec.hostUsers")["failures"][0])
        self.assertFalse(self.run_expression("has(object.spec.hostUsers)")["admitted"])

    def test_no_kubernetes_library(self):
        for expression in ("'a,b'.split(',').size() == 2", "'x'.lowerAscii() == 'x'", "[1, 2].isSorted()",
                           "quantity('1Gi').isGreaterThan(quantity('1Mi'))"):
            with self.subTest(expression):
                self.assertIn("error", self.run_expression(expression)["failures"][0])

    def test_an_object_is_not_iterable(self):
        self.assertIn("iteration over an object type",
                      self.run_expression("object.spec.all(k, k != 'hostPID')")["failures"][0]["error"])
        self.assertTrue(self.run_expression("object.metadata.labels.all(k, k != 'x')")["admitted"])


if __name__ == "__main__":
    unittest.main()
