"""4. A server-side dry run of every rendering, only where KUBECONFIG points at a reachable
cluster (the apiserver's own validation, defaulting and admission, Pod Security included).
There is no cluster on the machines that run make test: there it says SKIP, never PASS. It only
asks the server to validate (--dry-run=server): nothing is created."""
import os
import subprocess
import unittest

import k8skit


def cluster_reachable():
    if not os.environ.get("KUBECONFIG"):
        return "KUBECONFIG is not set: no cluster to dry-run against (the offline checks ran)"
    k8skit.require("kubectl")
    r = subprocess.run(["kubectl", "version", "--request-timeout=5s", "-o", "json"], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0 or '"serverVersion"' not in r.stdout:
        return f"KUBECONFIG={os.environ['KUBECONFIG']} reaches no cluster: {r.stderr.strip()[:200]}"
    return None


class ServerDryRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = cluster_reachable()
        if why:
            raise unittest.SkipTest(why)

    def dry_run(self, text):
        r = subprocess.run(["kubectl", "apply", "--dry-run=server", "--validate=strict", "-f", "-"], input=text,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_base(self):
        self.dry_run(k8skit.render(k8skit.DEPLOY))

    def test_bkctl_kube(self):
        self.dry_run(k8skit.bkctl_kube("sb-dry-run"))

    def test_agent_sandbox(self):
        """Needs agent-sandbox's CRDs in the cluster (docs/DEPLOY.md)."""
        r = subprocess.run(["kubectl", "get", "crd", "sandboxtemplates.extensions.agents.x-k8s.io"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            self.skipTest("agent-sandbox's CRDs are not installed in this cluster")
        self.dry_run(k8skit.render(k8skit.AGENT_SANDBOX))
        self.dry_run(k8skit.render(k8skit.AGENT_SANDBOX / "claim"))

    def test_the_admission_guard_refuses_a_privileged_pod(self):
        """Where the base is applied, the server itself (dry run: admission runs, nothing is made)
        refuses a privileged pod in the namespace, naming the policy."""
        r = subprocess.run(["kubectl", "get", "validatingadmissionpolicybinding", "boxkite-sandbox-pod-shape"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            self.skipTest("the base is not applied to this cluster (no boxkite-sandbox-pod-shape binding)")
        r = subprocess.run(["kubectl", "run", "-n", "boxkite", "bk-admission-probe", "--image=busybox",
                            "--privileged", "--restart=Never", "--dry-run=server", "--", "true"],
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("boxkite-sandbox-pod-shape", r.stderr)

    def test_opt_in_file(self):
        r = subprocess.run(["kubectl", "apply", "--dry-run=server", "-n", "boxkite", "-f", str(k8skit.PERMISSIVE)],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
