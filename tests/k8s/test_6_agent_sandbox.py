"""6. Warm pools on agent-sandbox (deploy/agent-sandbox): the API version pinned and its CRD
schemas vendored (crds/agent-sandbox/SOURCE), every object valid against them (and the validator
shown to refuse broken copies), the template's pod exactly deploy/sandbox/pod.yaml's but for the
pool's claim key, and the pods the controller makes of it (agent_sandbox.py) holding the
invariants and selected by the NetworkPolicy: the truth table on a warm pod and a claimed one,
and the controller's own "Managed" policy shown to be what networkPolicyManagement: Unmanaged
keeps out. (The admission guard on those pods: test_5.)"""
import copy
import json
import re
import unittest

import agent_sandbox
import invariants
import k8skit
from netpol import External, Pod, allowed
from test_3_netpol import TruthTable

API = "extensions.agents.x-k8s.io/v1beta1"
SCHEMAS = k8skit.HERE / "crds" / "agent-sandbox"


def source():
    return dict(re.findall(r"(?m)^(\w+): (.*)$", (SCHEMAS / "SOURCE").read_text()))


def renderings():
    """Every kustomization holding agent-sandbox objects: the pool, the claim, the pool overlay."""
    out = {}
    for d in k8skit.KUSTOMIZATIONS:
        objs = k8skit.docs(k8skit.render(d))
        if any(o["apiVersion"].startswith("extensions.agents.x-k8s.io/") for o in objs):
            out[str(d.relative_to(k8skit.REPO))] = objs
    return out


class Pinned(unittest.TestCase):
    def test_one_release_everywhere(self):
        """The tag the schemas came from is the one the kustomization, the template and DEPLOY.md
        name, and every object uses the vendored API version."""
        src = source()
        self.assertEqual((src["version"], API.split("/")[1]), ("v1beta1", "v1beta1"))
        self.assertRegex(src["commit"], r"^[0-9a-f]{40}$")
        for f in (k8skit.AGENT_SANDBOX / "kustomization.yaml", k8skit.AGENT_SANDBOX / "sandbox-template.yaml",
                  k8skit.REPO / "docs" / "DEPLOY.md"):
            with self.subTest(str(f.relative_to(k8skit.REPO))):
                text = " ".join(f.read_text().replace("#", " ").split())
                self.assertTrue(f"release {src['tag']}" in text, f"it does not say 'release {src['tag']}'")
                self.assertEqual(set(re.findall(r"\bv\d+\.\d+\.\d+\b", f.read_text())) - {"v0.1.0"}, {src["tag"]})
        kinds = set()
        for what, objs in renderings().items():
            for o in objs:
                with self.subTest(f"{what}: {o['kind']}"):
                    self.assertEqual(o["apiVersion"], API)
                    kinds.add(o["kind"])
        self.assertEqual(kinds, {"SandboxTemplate", "SandboxWarmPool", "SandboxClaim"})

    def test_every_kind_used_has_its_schema(self):
        vendored = {json.loads(f.read_text())["kind"] for f in SCHEMAS.glob("*.json")}
        self.assertEqual(vendored, {"SandboxTemplate", "SandboxWarmPool", "SandboxClaim"})
        for f in SCHEMAS.glob("*.json"):
            crd = json.loads(f.read_text())
            with self.subTest(f.name):
                self.assertEqual((crd["group"], crd["version"], crd["scope"]),
                                 ("extensions.agents.x-k8s.io", "v1beta1", "Namespaced"))
                self.assertIn(f"-> {f.name}", (SCHEMAS / "SOURCE").read_text())

    def test_the_objects_validate_against_the_vendored_schemas(self):
        for what, objs in renderings().items():
            with self.subTest(what):
                rc, out = k8skit.validate(k8skit.yaml().safe_dump_all(objs))
                self.assertEqual(rc, 0, out)
                self.assertRegex(out, rf"validate: {len(objs)} objects valid, 0 invalid")


class ValidatorCanFail(unittest.TestCase):
    """crd.mjs refuses each broken copy, for its own reason."""

    @classmethod
    def setUpClass(cls):
        objs = k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX))
        cls.template, cls.pool = k8skit.one(objs, "SandboxTemplate"), k8skit.one(objs, "SandboxWarmPool")
        cls.claim = k8skit.one(k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX / "claim")), "SandboxClaim")

    def refused(self, obj, mutate, message):
        o = copy.deepcopy(obj)
        mutate(o)
        rc, out = k8skit.validate(k8skit.yaml().safe_dump(o))
        self.assertEqual(rc, 1, out)
        self.assertIn(message, out)

    def pod_spec(self, o):
        return o["spec"]["podTemplate"]["spec"]

    def test_broken_copies(self):
        cases = [
            ("unknown field", self.template, lambda o: o["spec"].update(networkPolicyMode="Unmanaged"),
             ".spec.networkPolicyMode: unknown field"),
            ("unknown field in the pod", self.template, lambda o: self.pod_spec(o).update(shareProcessNamespce=True),
             ".spec.podTemplate.spec.shareProcessNamespce: unknown field"),
            ("enum", self.template, lambda o: o["spec"].update(networkPolicyManagement="Off"),
             "\"Off\" is not one of"),
            ("required", self.template, lambda o: o["spec"].pop("podTemplate"),
             ".spec: required field podTemplate is missing"),
            ("type", self.template, lambda o: self.pod_spec(o).update(hostPID="false"),
             ".spec.podTemplate.spec.hostPID: expected boolean, got string"),
            ("int32", self.template, lambda o: self.pod_spec(o)["containers"][1]["ports"][0].update(
                containerPort=2 ** 31), "does not fit an int32"),
            ("list-map key", self.template, lambda o: self.pod_spec(o)["containers"].append(
                copy.deepcopy(self.pod_spec(o)["containers"][0])), "duplicate key [\"sandbox\"]"),
            ("metadata", self.template, lambda o: o["metadata"].update(lables={}),
             ".metadata.lables: unknown field of V1ObjectMeta"),
            ("no name", self.pool, lambda o: o["metadata"].pop("name"), ".metadata.name: required"),
            ("minimum", self.pool, lambda o: o["spec"].update(replicas=-1), "-1 is below the minimum 0"),
            ("pool enum", self.pool, lambda o: o["spec"]["updateStrategy"].update(type="Rolling"), "is not one of"),
            ("claim without a pool", self.claim, lambda o: o["spec"].pop("warmPoolRef"),
             ".spec: required field warmPoolRef is missing"),
            ("claim field of another version", self.claim, lambda o: o["spec"].update(sandboxTemplateRef={"name": "x"}),
             ".spec.sandboxTemplateRef: unknown field"),
        ]
        for what, obj, mutate, message in cases:
            with self.subTest(what):
                self.refused(obj, mutate, message)

    def test_an_unmodelled_schema_keyword_fails(self):
        """A vendored schema using a keyword crd.mjs does not model fails, never passes silently."""
        k8skit.node_modules("yaml")
        r = k8skit.subprocess.run(
            ["node", "--input-type=module", "-e",
             "import {schemaErrors} from './crd.mjs'; console.log(JSON.stringify(schemaErrors("
             "{type: 'object', 'x-kubernetes-validations': [{rule: 'false'}]}, {})))"],
            cwd=k8skit.HERE, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), [": schema keyword x-kubernetes-validations is not modelled by crd.mjs"])


class Template(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        objs = k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX))
        cls.template, cls.pool = k8skit.one(objs, "SandboxTemplate"), k8skit.one(objs, "SandboxWarmPool")
        cls.claim = k8skit.one(k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX / "claim")), "SandboxClaim")
        cls.pod = k8skit.sandbox_pod(k8skit.docs(k8skit.render(k8skit.DEPLOY / "sandbox")))

    def test_the_pod_is_deploy_sandbox_but_for_the_claim_key(self):
        """Exactly these differences from pod.yaml: the sidecar's key option, its variable, and
        the Secret they and the TLS volume name; no instance label (the controller names pods)."""
        want = copy.deepcopy(self.pod["spec"])
        sidecar = next(c for c in want["containers"] if c["name"] == "sidecar")
        i = sidecar["args"].index("--key-env")
        sidecar["args"][i:i + 2] = ["--claim-key-env", "BOXKITE_CLAIM_KEY"]
        sidecar["env"] = [{"name": "BOXKITE_CLAIM_KEY", "valueFrom": {"secretKeyRef": {
            "name": invariants.POOL_SECRET, "key": "key"}}}]
        next(v for v in want["volumes"] if v["name"] == "tls")["secret"]["secretName"] = invariants.POOL_SECRET
        self.assertEqual(self.template["spec"]["podTemplate"]["spec"], want)
        labels = dict(self.pod["metadata"]["labels"])
        labels.pop("app.kubernetes.io/instance")
        self.assertEqual(self.template["spec"]["podTemplate"]["metadata"], {"labels": labels})

    def test_what_the_template_allows_claims(self):
        spec = self.template["spec"]
        self.assertEqual(spec["networkPolicyManagement"], "Unmanaged")
        self.assertNotIn("networkPolicy", spec)
        self.assertEqual((spec["envVarsInjectionPolicy"], spec["volumeClaimTemplatesPolicy"]),
                         ("Disallowed", "Disallowed"))
        self.assertNotIn("volumeClaimTemplates", spec)
        self.assertEqual(self.pool["spec"]["sandboxTemplateRef"]["name"], self.template["metadata"]["name"])
        self.assertGreaterEqual(self.pool["spec"]["replicas"], 1)
        self.assertEqual(self.claim["spec"]["warmPoolRef"]["name"], self.pool["metadata"]["name"])
        self.assertNotIn("env", self.claim["spec"])

    def test_name_hash_is_fnv1a(self):
        """The controller's NameHash (FNV-1a, 32 bits): the published test vectors."""
        for text, want in (("", "811c9dc5"), ("a", "e40c292c"), ("foobar", "bf9cf968")):
            self.assertEqual(agent_sandbox.name_hash(text), want)

    def test_the_controllers_pods_hold_the_invariants(self):
        warm = agent_sandbox.warm_pod(self.template, self.pool, "boxkite-x7k2p")
        claimed = agent_sandbox.claimed_pod(warm, self.template, self.claim)
        for what, pod in (("warm", warm), ("claimed", claimed)):
            with self.subTest(what):
                self.assertEqual(invariants.check_pod(pod), [])
                self.assertEqual(invariants.check_api_semantics(pod), [])
                rc, out = k8skit.validate(k8skit.yaml().safe_dump(pod))
                self.assertEqual(rc, 0, out)
                # Unmanaged: the controller leaves the pod's DNS alone (Managed sends it to public resolvers).
                self.assertNotIn("dnsPolicy", pod["spec"])
        self.assertEqual(claimed["metadata"]["labels"]["sandbox.users.io/tenant"], "example")
        self.assertNotIn(agent_sandbox.WARM_POOL, claimed["metadata"]["labels"])

    def test_a_claim_cannot_relabel_the_pod_out_of_the_policy(self):
        """The controller refuses a claim that overrides a template label or uses another domain."""
        for labels in ({"app.kubernetes.io/component": "other"}, {"app": "x"}, {"example.com/x": "y"}):
            with self.subTest(labels):
                claim = copy.deepcopy(self.claim)
                claim["spec"]["additionalPodMetadata"]["labels"] = labels
                with self.assertRaises(ValueError):
                    agent_sandbox.claimed_pod(agent_sandbox.warm_pod(self.template, self.pool, "boxkite-a"),
                                              self.template, claim)


class PoolTruthTable(TruthTable):
    @classmethod
    def pool(cls):
        objs = k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX))
        return k8skit.one(objs, "SandboxTemplate"), k8skit.one(objs, "SandboxWarmPool")


class WarmPodTruthTable(PoolTruthTable, unittest.TestCase):
    """The base's NetworkPolicy decides for a warm pod as the controller makes it."""

    @classmethod
    def pod_under_test(cls):
        template, pool = cls.pool()
        return agent_sandbox.warm_pod(template, pool, "boxkite-x7k2p")

    def test_managed_would_open_egress(self):
        """Control: had the template left networkPolicyManagement to its default (Managed), the
        controller's own policy would select these pods too, and the union opens egress to every
        public address -- which Unmanaged keeps out."""
        template, _ = self.pool()
        managed = self.base + [agent_sandbox.managed_default_policy(template)]
        sb = Pod("boxkite-x7k2p", self.namespace, self.labels, self.ports, ip="10.1.0.10")
        internet = External("203.0.113.7")
        self.assertFalse(allowed(self.base, sb, internet, 443, "TCP", self.namespaces))
        self.assertTrue(allowed(managed, sb, internet, 443, "TCP", self.namespaces))
        self.assertTrue(allowed(managed, sb, internet, 22, "TCP", self.namespaces))


class ClaimedPodTruthTable(PoolTruthTable, unittest.TestCase):
    """... and for the same pod once a claim has taken it (its labels change)."""

    @classmethod
    def pod_under_test(cls):
        template, pool = cls.pool()
        claim = k8skit.one(k8skit.docs(k8skit.render(k8skit.AGENT_SANDBOX / "claim")), "SandboxClaim")
        return agent_sandbox.claimed_pod(agent_sandbox.warm_pod(template, pool, "boxkite-x7k2p"), template, claim)


if __name__ == "__main__":
    unittest.main()
