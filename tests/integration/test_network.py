"""The escape suite, network part: boxkited runs in a "pod" network namespace from which a
cloud metadata stand-in (an HTTP server on 169.254.169.254:80 in a "cloud" namespace, reached
over a veth pair and a route) really answers; an exec must reach neither it nor anything else
of the pod's network: only its own loopback.

Everything lives in two network namespaces made here (bkit.NetPair) and removed afterwards; the
machine's own interfaces and routes are never touched.
"""
import secrets
import unittest

import bkit

N = None
D = None
MARKER = f"bk-metadata-standin-{secrets.token_hex(6)}"
POD_LISTENER = None   # another listener in the pod namespace, on the pod's address
POD_LOOPBACK = None   # and one on the pod's loopback


def setUpModule():
    global N, D, POD_LISTENER, POD_LOOPBACK
    bkit.require_root()
    bkit.require_build()
    bkit.require_tools("ip")
    N = bkit.NetPair()
    bkit.popen([bkit.PYTHON, "-c", bkit.HTTP_STANDIN, N.METADATA, 80, MARKER], netns=N.cloud)
    tcp = (N.POD_ADDR, 7700)
    D = bkit.Daemon("netns", tcp=tcp, netns=N.pod).start()
    D.install_probe()
    POD_LISTENER = (N.POD_ADDR, 8080)  # the pod namespace is new: every port is free
    bkit.tcp_listener(*POD_LISTENER, netns=N.pod)
    POD_LOOPBACK = ("127.0.0.1", POD_LISTENER[1])
    bkit.tcp_listener(*POD_LOOPBACK, netns=N.pod)


def get_from_pod(url):
    return bkit.run([bkit.PYTHON, "-c", bkit.HTTP_GET, url], netns=N.pod, timeout=10)


class CloudMetadata(bkit.ProbeAssertions, unittest.TestCase):
    def test_standin_answers_from_the_sidecar_netns(self):
        """Control: from the pod namespace (boxkited's vantage point) the stand-in answers."""
        r = bkit.wait_for(lambda: (lambda r: r if r.returncode == 0 else None)(
            get_from_pod(f"http://{N.METADATA}/latest/meta-data/")), 10, interval=0.2,
            what="the metadata stand-in to answer from the pod namespace")
        self.assertEqual(r.stdout.strip(), MARKER)

    def test_exec_cannot_reach_metadata(self):
        self.test_standin_answers_from_the_sidecar_netns()
        self.assertDenied(D, "tcp", N.METADATA, 80, reason="ENETUNREACH")

    def test_exec_interfaces_only_lo(self):
        self.assertDenied(D, "interfaces", reason="only-lo")


class PodNetwork(bkit.ProbeAssertions, unittest.TestCase):
    def test_boxkited_tcp_port_on_pod_address(self):
        host, port = D.tcp
        h = D.health(url=f"tcp://{host}:{port}", netns=N.pod)
        self.assertEqual(h.get("status"), "OK", f"control: Health over tcp from the pod namespace: {h}")
        self.assertDenied(D, "tcp", host, port, reason="ENETUNREACH")

    def test_another_listener_on_pod_address(self):
        self.assertEqual(bkit.run([bkit.PYTHON, "-c", bkit.TCP_CONNECT, *POD_LISTENER], netns=N.pod).returncode, 0)
        self.assertDenied(D, "tcp", *POD_LISTENER, reason="ENETUNREACH")

    def test_another_listener_on_pod_loopback(self):
        self.assertEqual(bkit.run([bkit.PYTHON, "-c", bkit.TCP_CONNECT, *POD_LOOPBACK], netns=N.pod).returncode, 0)
        self.assertDenied(D, "tcp", *POD_LOOPBACK, reason="ECONNREFUSED")

    def test_udp_to_pod_peer(self):
        self.assertDenied(D, "udp", N.CLOUD_ADDR, 53, reason="ENETUNREACH")
