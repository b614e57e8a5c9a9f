"""1. deploy/ renders (kubectl kustomize, offline) and every object validates against the real
Kubernetes schemas with unknown fields refused (validate.mjs): each kustomization, bkctl kube's
output (with the compiled-in template and with each overlay's rendering as --template) and the
opt-in policy file. And the validator itself: broken copies of the pod must fail it, each for
its own reason, or a pass would mean nothing."""
import copy
import unittest

import k8skit


class Render(unittest.TestCase):
    def test_every_kustomization_renders_and_validates(self):
        self.assertGreaterEqual(len(k8skit.KUSTOMIZATIONS), 2, k8skit.KUSTOMIZATIONS)
        for d in k8skit.KUSTOMIZATIONS:
            with self.subTest(kustomization=str(d.relative_to(k8skit.REPO))):
                rc, out = k8skit.validate(k8skit.render(d))
                self.assertEqual(rc, 0, out)
                self.assertRegex(out, r"validate: [1-9]\d* objects valid, 0 invalid")

    def test_bkctl_kube_renders_valid_objects(self):
        texts = {"compiled-in template": k8skit.bkctl_kube("sb-test")}
        for d in k8skit.KUSTOMIZATIONS:
            rendering = k8skit.render(d)
            if (d.parent.name == "overlays" or d.name == "sandbox") and \
                    [o["kind"] for o in k8skit.docs(rendering)] == ["Pod"]:
                texts[f"--template {d.relative_to(k8skit.REPO)}"] = k8skit.bkctl_kube(
                    "--template", "-", "sb-test", template=rendering)
        self.assertGreaterEqual(len(texts), 3, "the compiled-in template, deploy/sandbox, an overlay")
        for what, text in texts.items():
            with self.subTest(what):
                objs = k8skit.docs(text)
                self.assertEqual(sorted(o["kind"] for o in objs), ["Pod", "Secret"])
                rc, out = k8skit.validate(text)
                self.assertEqual(rc, 0, out)

    def test_the_opt_in_policy_file_validates(self):
        rc, out = k8skit.validate(k8skit.PERMISSIVE.read_text())
        self.assertEqual(rc, 0, out)

    def test_compiled_in_template_is_deploy_sandbox(self):
        """bkctl kube's pod is deploy/sandbox/pod.yaml under another name, nothing else."""
        y = k8skit.yaml()
        ours = k8skit.sandbox_pod(k8skit.docs(k8skit.bkctl_kube("-n", "boxkite", "boxkite-sandbox")))
        base = k8skit.sandbox_pod(k8skit.docs(k8skit.render(k8skit.DEPLOY / "sandbox")))
        self.assertEqual(y.safe_dump(ours, sort_keys=True), y.safe_dump(base, sort_keys=True))


class ValidatorCanFail(unittest.TestCase):
    """Each broken copy of the sandbox pod must be refused, with its own message."""

    @classmethod
    def setUpClass(cls):
        cls.pod = k8skit.sandbox_pod(k8skit.docs(k8skit.render(k8skit.DEPLOY / "sandbox")))

    def refused(self, mutate, message):
        pod = copy.deepcopy(self.pod)
        mutate(pod)
        rc, out = k8skit.validate(k8skit.yaml().safe_dump(pod))
        self.assertEqual(rc, 1, out)
        self.assertIn(message, out)

    def test_unknown_field(self):
        self.refused(lambda p: p["spec"].update(shareProcessNamespce=True),
                     ".spec.shareProcessNamespce: unknown field of V1PodSpec")

    def test_unknown_field_deep(self):
        self.refused(lambda p: k8skit.container(p, "sidecar")["securityContext"].update(capabilites={}),
                     "capabilites: unknown field of V1SecurityContext")

    def test_wrong_type(self):
        self.refused(lambda p: k8skit.container(p, "sidecar")["securityContext"]["capabilities"].update(add="KILL"),
                     "capabilities/add must be array")

    def test_bad_enum(self):
        self.refused(lambda p: k8skit.container(p, "sandbox")["securityContext"]["seccompProfile"].update(
            type="Default"), "must be equal to one of the allowed values")

    def test_missing_required(self):
        self.refused(lambda p: k8skit.container(p, "sidecar").pop("name"),
                     "containers/1 must have required property name")

    def test_duplicate_key(self):
        rc, out = k8skit.validate("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  name: b\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("Map keys must be unique", out)


if __name__ == "__main__":
    unittest.main()
