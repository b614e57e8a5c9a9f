"""3. NetworkPolicy: the evaluator (netpol.py) tested on its own, then deploy/'s truth table --
which pod may reach which port in which direction -- under the base's policies alone and under
the base plus the opt-in permissive file (their union), for bkctl kube's pod and for its pod of
overlays/egress (the one the egress policy selects), as a cluster that enforces
NetworkPolicy would decide. Whether a cluster enforces it at all only a live check shows:
SECURITY.md, layer two."""
import unittest

import k8skit
from netpol import External, Pod, allowed


def policy(name, ns="n", selector=None, types=None, ingress=None, egress=None):
    spec = {"podSelector": selector if selector is not None else {"matchLabels": {"app": "a"}}}
    if types is not None:
        spec["policyTypes"] = types
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    return {"kind": "NetworkPolicy", "metadata": {"name": name, "namespace": ns}, "spec": spec}


A = Pod("a", "n", {"app": "a"}, ports={"web": (8080, "TCP")}, ip="10.0.0.1")
B = Pod("b", "n", {"app": "b"}, ports={"web": (9090, "TCP")}, ip="10.0.0.2")
OTHER_NS = Pod("c", "m", {"app": "b"}, ip="10.0.1.3")
NAMESPACES = {"n": {"team": "x"}, "m": {"team": "y"}}


class Evaluator(unittest.TestCase):
    def test_no_policy_allows_everything(self):
        self.assertTrue(allowed([], A, B, 1))
        self.assertTrue(allowed([], External("203.0.113.1"), A, 1))

    def test_an_empty_ingress_policy_denies_ingress_only(self):
        deny = [policy("deny", ingress=[])]
        self.assertFalse(allowed(deny, B, A, 8080))
        self.assertTrue(allowed(deny, A, B, 9090), "egress is not isolated by an Ingress-only policy")

    def test_policy_types_default(self):
        # No policyTypes: Ingress, plus Egress when an egress section exists.
        self.assertFalse(allowed([policy("p", egress=[])], A, B, 9090))
        self.assertTrue(allowed([policy("p", ingress=[{}])], A, B, 9090))

    def test_union_of_policies(self):
        p80 = policy("p80", types=["Egress"], egress=[{"ports": [{"port": 80}]}])
        p443 = policy("p443", types=["Egress"], egress=[{"ports": [{"port": 443}]}])
        dst = External("203.0.113.1")
        self.assertTrue(allowed([p80], A, dst, 80))
        self.assertFalse(allowed([p80], A, dst, 443))
        self.assertTrue(allowed([p80, p443], A, dst, 443), "policies add up, never narrow")
        self.assertTrue(allowed([p80, policy("open", types=["Egress"], egress=[{}])], A, dst, 22))

    def test_both_ends_must_allow(self):
        out = policy("out", types=["Egress"], egress=[{}])
        shut = policy("shut", selector={"matchLabels": {"app": "b"}}, types=["Ingress"])
        self.assertTrue(allowed([out], A, B, 9090))
        self.assertFalse(allowed([out, shut], A, B, 9090), "egress allowed at A, ingress denied at B")

    def test_pod_selector_alone_is_the_own_namespace(self):
        p = policy("p", ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "b"}}}]}])
        self.assertTrue(allowed([p], B, A, 8080))
        self.assertFalse(allowed([p], OTHER_NS, A, 8080))

    def test_namespace_and_pod_selector_in_one_peer_is_and(self):
        both = policy("and", ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"team": "y"}},
                                                 "podSelector": {"matchLabels": {"app": "b"}}}]}])
        self.assertTrue(allowed([both], OTHER_NS, A, 8080, namespaces=NAMESPACES))
        self.assertFalse(allowed([both], B, A, 8080, namespaces=NAMESPACES))
        self.assertFalse(allowed([both], Pod("d", "m", {}), A, 8080, namespaces=NAMESPACES))
        either = policy("or", ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"team": "y"}}},
                                                 {"podSelector": {"matchLabels": {"app": "b"}}}]}])
        self.assertTrue(allowed([either], B, A, 8080, namespaces=NAMESPACES))
        self.assertTrue(allowed([either], Pod("d", "m", {}), A, 8080, namespaces=NAMESPACES))

    def test_ip_block_and_except(self):
        p = policy("p", types=["Egress"], egress=[{"to": [{"ipBlock": {"cidr": "192.0.2.0/24",
                                                                       "except": ["192.0.2.128/25"]}}]}])
        self.assertTrue(allowed([p], A, External("192.0.2.5"), 1))
        self.assertFalse(allowed([p], A, External("192.0.2.200"), 1))
        self.assertFalse(allowed([p], A, External("198.51.100.1"), 1))

    def test_named_ports_resolve_on_the_destination(self):
        p = policy("p", ingress=[{"ports": [{"port": "web"}]}])
        self.assertTrue(allowed([p], B, A, 8080))
        self.assertFalse(allowed([p], B, A, 9090), "9090 is web on B, not on A")

    def test_protocol_and_end_port(self):
        p = policy("p", ingress=[{"ports": [{"port": 5000, "endPort": 5010, "protocol": "UDP"}]}])
        self.assertTrue(allowed([p], B, A, 5005, "UDP"))
        self.assertFalse(allowed([p], B, A, 5005, "TCP"))
        self.assertFalse(allowed([p], B, A, 5011, "UDP"))

    def test_match_expressions(self):
        sel = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]},
                                    {"key": "tier", "operator": "DoesNotExist"}]}
        deny = [policy("p", selector=sel, ingress=[])]
        self.assertFalse(allowed(deny, B, A, 8080))
        self.assertTrue(allowed(deny, B, Pod("a2", "n", {"app": "a", "tier": "x"}), 8080))

    def test_empty_pod_selector_selects_the_namespace(self):
        deny = [policy("p", selector={}, ingress=[])]
        self.assertFalse(allowed(deny, A, B, 9090))
        self.assertTrue(allowed(deny, A, OTHER_NS, 1))


class TruthTable:
    """Every row: (what, source, destination, port, protocol, allowed under the base, allowed
    with the permissive opt-in file as well), for the sandbox pod pod_under_test() returns: a
    subclass that is also a TestCase runs it (test_6 does for agent-sandbox's pods)."""

    @classmethod
    def pod_under_test(cls):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        pod = cls.pod_under_test()
        labels = pod["metadata"]["labels"]
        ports = {p["name"]: (p["containerPort"], p.get("protocol", "TCP"))
                 for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        ns = pod["metadata"]["namespace"]
        cls.base = [o for o in k8skit.docs(k8skit.render(k8skit.DEPLOY)) if o["kind"] == "NetworkPolicy"]
        for p in cls.base:
            assert p["metadata"]["namespace"] == ns, p["metadata"]
        cls.permissive = [dict(o, metadata=dict(o["metadata"], namespace=ns))
                          for o in k8skit.docs(k8skit.PERMISSIVE.read_text())]
        cls.namespaces = {ns: {"kubernetes.io/metadata.name": ns},
                          "orchestrator": {"kubernetes.io/metadata.name": "orchestrator", "boxkite.dev/clients": "true"},
                          "monitoring": {"kubernetes.io/metadata.name": "monitoring", "boxkite.dev/clients": "true"},
                          "elsewhere": {"kubernetes.io/metadata.name": "elsewhere"},
                          "kube-system": {"kubernetes.io/metadata.name": "kube-system"}}
        cls.namespace, cls.labels, cls.ports = ns, labels, ports
        sb = Pod(pod["metadata"]["name"], ns, labels, ports, ip="10.1.0.10")
        sb2 = Pod("sb-2", ns, dict(labels, **{"app.kubernetes.io/instance": "sb-2"}), ports, ip="10.1.0.11")
        client = Pod("orch", "orchestrator", {"boxkite.dev/client": "true"}, ip="10.1.1.5")
        client_elsewhere = Pod("orch", "elsewhere", {"boxkite.dev/client": "true"}, ip="10.1.2.5")
        client_same_ns = Pod("orch", ns, {"boxkite.dev/client": "true"}, ip="10.1.0.50")
        unlabelled = Pod("other", "orchestrator", {}, ip="10.1.1.6")
        scraper = Pod("prom", "monitoring", {"boxkite.dev/metrics-scraper": "true"}, ip="10.1.3.5")
        dns = Pod("coredns", "kube-system", {"k8s-app": "kube-dns"},
                  {"dns": (53, "UDP"), "dns-tcp": (53, "TCP")}, ip="10.1.4.2")
        metadata, internet = External("169.254.169.254"), External("203.0.113.7")
        storage = External("192.0.2.10")  # the placeholder rule's range
        ceiling = External("198.51.100.20")  # network-policy-egress.yaml's placeholder
        egress_pod = labels.get("boxkite.dev/egress") == "true"  # overlays/egress's pods
        api, http, preview = ports["api"][0], ports["http"][0], ports["preview"][0]
        cls.rows = [
            ("client -> api", client, sb, api, "TCP", True, True),
            ("client -> preview", client, sb, preview, "TCP", True, True),
            ("unlabelled pod -> preview", unlabelled, sb, preview, "TCP", False, False),
            ("internet -> preview", internet, sb, preview, "TCP", False, False),
            ("scraper -> preview", scraper, sb, preview, "TCP", False, False),
            ("sandbox -> another sandbox's preview", sb, sb2, preview, "TCP", False, False),
            ("client -> http (metrics)", client, sb, http, "TCP", False, False),
            ("client -> another port", client, sb, 22, "TCP", False, False),
            ("client in an unlabelled namespace -> api", client_elsewhere, sb, api, "TCP", False, False),
            ("client label in the sandbox namespace -> api", client_same_ns, sb, api, "TCP", False, False),
            ("unlabelled pod -> api", unlabelled, sb, api, "TCP", False, False),
            ("scraper -> http", scraper, sb, http, "TCP", True, True),
            ("scraper -> api", scraper, sb, api, "TCP", False, False),
            ("internet -> api", internet, sb, api, "TCP", False, False),
            ("sandbox -> another sandbox's api", sb, sb2, api, "TCP", False, False),
            ("sandbox -> DNS 53/UDP", sb, dns, 53, "UDP", True, True),
            ("sandbox -> DNS 53/TCP", sb, dns, 53, "TCP", True, True),
            ("sandbox -> DNS pod port 80", sb, dns, 80, "TCP", False, True),
            ("sandbox -> metadata 80", sb, metadata, 80, "TCP", False, True),
            ("sandbox -> internet 443", sb, internet, 443, "TCP", False, True),
            ("sandbox -> internet 53/UDP", sb, internet, 53, "UDP", False, True),
            ("sandbox -> storage placeholder 443", sb, storage, 443, "TCP", True, True),
            ("sandbox -> storage placeholder 80", sb, storage, 80, "TCP", False, True),
            ("sandbox -> orchestrator", sb, client, 8080, "TCP", False, True),
            ("sandbox -> egress placeholder 443", sb, ceiling, 443, "TCP", egress_pod, True),
            ("sandbox -> egress placeholder 80", sb, ceiling, 80, "TCP", False, True),
        ]

    def check(self, policies, column):
        for row in self.rows:
            what, src, dst, port, proto = row[:5]
            with self.subTest(what):
                self.assertEqual(allowed(policies, src, dst, port, proto, self.namespaces), row[column], what)

    def test_base(self):
        self.check(self.base, 5)

    def test_base_plus_permissive_is_the_union(self):
        self.check(self.base + self.permissive, 6)

    def test_the_selector_is_load_bearing(self):
        """Control: with the policy's selector off by one label value (as in the seed's story of a
        selector nothing carried), the sandbox is wide open both ways."""
        broken = [dict(p, spec=dict(p["spec"], podSelector={"matchLabels": {"app.kubernetes.io/component": "execution"}}))
                  for p in self.base]
        open_rows = [r[0] for r in self.rows if not r[5] and allowed(broken, *r[1:5], self.namespaces)]
        self.assertGreaterEqual(len(open_rows), len([r for r in self.rows if not r[5]]) - 1, open_rows)


class DeployTruthTable(TruthTable, unittest.TestCase):
    """The pod bkctl kube makes."""

    @classmethod
    def pod_under_test(cls):
        return k8skit.sandbox_pod(k8skit.docs(k8skit.bkctl_kube("sb-1")))


class EgressTruthTable(TruthTable, unittest.TestCase):
    """The pod bkctl kube makes of overlays/egress: the same table, plus its ceiling's placeholder
    on 443 (and only there), from network-policy-egress.yaml, which no other pod gets."""

    @classmethod
    def pod_under_test(cls):
        pod = k8skit.sandbox_pod(k8skit.docs(k8skit.bkctl_kube(
            "--template", "-", "sb-egress", template=k8skit.render(k8skit.DEPLOY / "overlays" / "egress"))))
        assert pod["metadata"]["labels"].get("boxkite.dev/egress") == "true", pod["metadata"]["labels"]
        return pod


if __name__ == "__main__":
    unittest.main()
