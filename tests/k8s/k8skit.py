"""Shared machinery of the k8s tier (tests/k8s): render deploy/ and bkctl kube's output, load it.

Everything here is offline: `kubectl kustomize` renders without a server, bkctl kube prints
without one, node runs validate.mjs against the schemas in node_modules (make deps).
"""
import json
import os
import shutil
import subprocess
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEPLOY = REPO / "deploy"
BUILD = Path(os.environ.get("BOXKITE_BUILD", REPO / "build")).resolve()
BKCTL = BUILD / "bkctl"
# Every kustomization.yaml under deploy/, and the directories of those that render on their own:
# the base, the sandbox pod, agent-sandbox's pool and claim, each overlay (not the Components,
# which only overlays use).
KUSTOMIZATION_FILES = sorted(DEPLOY.rglob("kustomization.yaml"))
KUSTOMIZATIONS = [p.parent for p in KUSTOMIZATION_FILES if "\nkind: Component\n" not in p.read_text()]
PERMISSIVE = DEPLOY / "network-policy-permissive-optin.yaml"
AGENT_SANDBOX = DEPLOY / "agent-sandbox"


def yaml():
    try:
        import yaml as y
    except ImportError:
        raise unittest.SkipTest("needs python3-yaml (make test-deps)")
    return y


def require(tool):
    if not shutil.which(tool):
        raise unittest.SkipTest(f"needs {tool} on PATH")


def render(directory):
    """`kubectl kustomize DIR`: the YAML text."""
    require("kubectl")
    r = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory}: {r.stderr.strip()}")
    return r.stdout


def bkctl_kube(*args, template=None):
    """bkctl kube ARGS: the YAML text."""
    if not BKCTL.exists():
        raise unittest.SkipTest(f"{BKCTL} is not built")
    r = subprocess.run([str(BKCTL), "kube", *args], capture_output=True, text=True, timeout=60, input=template)
    if r.returncode != 0:
        raise AssertionError(f"bkctl kube {' '.join(args)}: {r.returncode} {r.stderr.strip()}")
    return r.stdout


def docs(text):
    return [d for d in yaml().safe_load_all(text) if d]


def node_modules(package):
    require("node")
    if not (HERE / "node_modules" / package).is_dir():
        raise unittest.SkipTest("tests/k8s/node_modules is missing (make deps runs npm ci there)")


def validate(*texts):
    """validate.mjs over the texts; (exit status, output)."""
    node_modules("kubernetes-models")
    out, rc = [], 0
    for text in texts:
        r = subprocess.run(["node", str(HERE / "validate.mjs"), "-"], input=text, capture_output=True,
                           text=True, timeout=120)
        out.append(r.stdout + r.stderr)
        rc = rc or r.returncode
    return rc, "".join(out)


def sandbox_pod(objects):
    pods = [o for o in objects if o["kind"] == "Pod"]
    if len(pods) != 1:
        raise AssertionError(f"expected one Pod, found {len(pods)}")
    return pods[0]


def container(pod, name):
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def one(objects, kind):
    found = [o for o in objects if o["kind"] == kind]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind}, found {len(found)}")
    return found[0]


def admission(base, cases, params=None):
    """The base's ValidatingAdmissionPolicy run on cases by admission.mjs: its answers by case name.
    cases: [{"name", "object", "operation" (CREATE), "namespace" (the object's), "subResource",
    "oldObject"}]; params: the param object (default: the base's ConfigMap boxkite-admission)."""
    node_modules("@bufbuild/cel")
    namespaces = {o["metadata"]["name"]: (o["metadata"].get("labels") or {}) for o in base if o["kind"] == "Namespace"}
    for ns in namespaces:
        # What the apiserver labels every namespace with.
        namespaces[ns] = dict(namespaces[ns], **{"kubernetes.io/metadata.name": ns})
    namespaces.setdefault("default", {"kubernetes.io/metadata.name": "default"})
    request = {
        "policy": one(base, "ValidatingAdmissionPolicy"),
        "binding": one(base, "ValidatingAdmissionPolicyBinding"),
        "params": params if params is not None else one(base, "ConfigMap"),
        "namespaces": namespaces,
        "cases": [dict({"operation": "CREATE", "namespace": c["object"]["metadata"].get("namespace", "boxkite")}, **c)
                  for c in cases],
    }
    r = subprocess.run(["node", str(HERE / "admission.mjs")], input=json.dumps(request), capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"admission.mjs: {r.returncode} {r.stderr.strip()}")
    return {a["name"]: a for a in json.loads(r.stdout)}
