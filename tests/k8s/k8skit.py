"""Shared machinery of the k8s tier (tests/k8s): render deploy/ and bkctl kube's output, load it.

Everything here is offline: `kubectl kustomize` renders without a server, bkctl kube prints
without one, node runs validate.mjs against the schemas in node_modules (make deps).
"""
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
# Every kustomization under deploy/: the base, the sandbox pod, each overlay.
KUSTOMIZATIONS = sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml"))
PERMISSIVE = DEPLOY / "network-policy-permissive-optin.yaml"


def yaml():
    try:
        import yaml as y
    except ImportError:
        raise unittest.SkipTest("needs python3-yaml (make deps)")
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


def validate(*texts):
    """validate.mjs over the texts; (exit status, output)."""
    require("node")
    if not (HERE / "node_modules" / "kubernetes-models").is_dir():
        raise unittest.SkipTest("tests/k8s/node_modules is missing (make deps runs npm ci there)")
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
