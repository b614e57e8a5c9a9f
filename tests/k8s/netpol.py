"""A NetworkPolicy evaluator (networking.k8s.io/v1 semantics), for deploy/'s truth table.

No policy analyser runs offline here (shared notes, k8s-tooling.md), so this implements what the
API documents, and test_3_netpol.py tests it on its own before trusting it with deploy/:

  * a pod is isolated in a direction only if some policy selecting it (same namespace,
    podSelector) lists that direction in policyTypes -- by default Ingress, plus Egress when the
    policy has an egress section;
  * an isolated pod allows a connection if ANY rule of ANY policy selecting it matches: policies
    are a union, never an intersection;
  * a connection needs both: egress allowed at the source and ingress allowed at the destination;
  * a rule with no (or an empty) from/to list matches every peer, with no ports every port; a
    peer with podSelector alone means pods of the policy's namespace; with namespaceSelector,
    pods of matching namespaces (both in one peer: AND); ipBlock matches addresses in the CIDR
    minus its excepts (here: endpoints outside the cluster, and pods by their IP);
  * a named port is resolved on the destination pod (protocol included); endPort ranges.

Endpoints: Pod(name, namespace, labels, ports={"api": (8443, "TCP")}, ip=...) and External(ip).
"""
import ipaddress


def selects(selector, labels):
    """A LabelSelector: {} matches everything; None (absent) nothing."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {op}")
    return True


class Pod:
    def __init__(self, name, namespace, labels, ports=None, ip=None):
        self.name, self.namespace, self.labels = name, namespace, dict(labels)
        self.ports = dict(ports or {})  # container port name -> (number, protocol)
        self.ip = ip

    def __repr__(self):
        return f"pod {self.namespace}/{self.name}"


class External:
    def __init__(self, ip):
        self.ip = ip
        self.namespace, self.labels, self.ports = None, {}, {}

    def __repr__(self):
        return f"external {self.ip}"


def policy_types(policy):
    spec = policy["spec"]
    if spec.get("policyTypes"):
        return set(spec["policyTypes"])
    return {"Ingress"} | ({"Egress"} if "egress" in spec else set())


def peer_matches(peer, policy_ns, other, namespaces):
    if "ipBlock" in peer:
        if other.ip is None:
            return False
        ip = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(c) for c in block.get("except") or [])
    if isinstance(other, External):
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], namespaces.get(other.namespace, {})):
            return False
    elif other.namespace != policy_ns:
        return False
    return selects(peer["podSelector"], other.labels) if "podSelector" in peer else True


def port_matches(ports, port, protocol, destination):
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p:
            return True
        want = p["port"]
        if isinstance(want, str):
            if destination.ports.get(want) == (port, protocol):
                return True
        elif want <= port <= p.get("endPort", want):
            return True
    return False


def direction_allows(policies, pod, other, port, protocol, direction, namespaces, destination):
    section, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    selecting = [p for p in policies
                 if p["metadata"].get("namespace", "default") == pod.namespace
                 and selects(p["spec"].get("podSelector", {}), pod.labels) and direction in policy_types(p)]
    if not selecting:
        return True  # not isolated in this direction
    for p in selecting:
        ns = p["metadata"].get("namespace", "default")
        for rule in p["spec"].get(section) or []:
            peers = rule.get(peers_key)
            if peers and not any(peer_matches(x, ns, other, namespaces) for x in peers):
                continue
            if port_matches(rule.get("ports"), port, protocol, destination):
                return True
    return False


def allowed(policies, source, destination, port, protocol="TCP", namespaces=None):
    """May source open port/protocol on destination, under these policies?"""
    namespaces = namespaces or {}
    egress = isinstance(source, External) or direction_allows(
        policies, source, destination, port, protocol, "Egress", namespaces, destination)
    ingress = isinstance(destination, External) or direction_allows(
        policies, destination, source, port, protocol, "Ingress", namespaces, destination)
    return egress and ingress
