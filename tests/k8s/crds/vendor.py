#!/usr/bin/env python3
"""Vendor the OpenAPI schemas of agent-sandbox's CRDs that deploy/agent-sandbox uses.

    tests/k8s/crds/vendor.py CHECKOUT TAG

CHECKOUT is a git clone of kubernetes-sigs/agent-sandbox; TAG the release deploy/ pins (it must be
the one deploy/agent-sandbox/kustomization.yaml and docs/DEPLOY.md name). For each CRD below it
reads k8s/crds/<file> at TAG, keeps the pinned version's openAPIV3Schema and writes
agent-sandbox/<plural>.json; agent-sandbox/SOURCE records the repository, the tag, its commit and
the SHA-256 of every file read. Nothing is downloaded: `make test` reads only what this wrote.
"""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = "kubernetes-sigs/agent-sandbox (GitHub)"
VERSION = "v1beta1"  # the API version deploy/agent-sandbox pins
CRDS = ("extensions.agents.x-k8s.io_sandboxtemplates.yaml", "extensions.agents.x-k8s.io_sandboxwarmpools.yaml",
        "extensions.agents.x-k8s.io_sandboxclaims.yaml")


def git(checkout, *args):
    return subprocess.run(["git", "-C", checkout, *args], check=True, capture_output=True).stdout


def main(checkout, tag):
    out = Path(__file__).resolve().parent / "agent-sandbox"
    out.mkdir(exist_ok=True)
    commit = git(checkout, "rev-list", "-n1", tag).decode().strip()
    source = [f"repository: {REPO}", f"tag: {tag}", f"commit: {commit}", f"version: {VERSION}",
              "license: Apache-2.0 (LICENSE at the tag); the schemas are kept as generated, reformatted only",
              "files (path at the tag, sha256 of its bytes -> the schema kept):"]
    for name in CRDS:
        path = f"k8s/crds/{name}"
        raw = git(checkout, "show", f"{tag}:{path}")
        crd = yaml.safe_load(raw)
        version = next(v for v in crd["spec"]["versions"] if v["name"] == VERSION)
        if not version.get("served"):
            sys.exit(f"{path}: {VERSION} is not served at {tag}")
        kept = {"group": crd["spec"]["group"], "version": VERSION, "kind": crd["spec"]["names"]["kind"],
                "scope": crd["spec"]["scope"], "storage": version.get("storage", False),
                "schema": version["schema"]["openAPIV3Schema"]}
        target = out / f"{crd['spec']['names']['plural']}.json"
        target.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
        source.append(f"  {path} sha256:{hashlib.sha256(raw).hexdigest()} -> {target.name}")
    (out / "SOURCE").write_text("\n".join(source) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
