#!/usr/bin/env python3
"""Copy a local directory tree into the sandbox and back, and check every file arrived whole.

    BOXKITE_URL=tcp://127.0.0.1:7700 BOXKITE_KEY_FILE=key python3 files_roundtrip.py [DIR]

DIR (default: a small tree made here) is uploaded under /workspace/roundtrip, listed, then
downloaded into a temporary directory and compared.
"""

import hashlib
import os
import sys
import tempfile
from typing import Dict

import boxkite


def tree_digests(root: str) -> Dict[str, str]:
    out = {}
    for here, _, files in os.walk(root):
        for name in files:
            path = os.path.join(here, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def upload_tree(box: boxkite.Client, local: str, remote: str) -> None:
    for here, _, files in os.walk(local):
        rel = os.path.relpath(here, local)
        target = remote if rel == "." else remote + "/" + rel
        box.mkdir(target, parents=True)
        for name in files:
            box.upload(os.path.join(here, name), target + "/" + name, overwrite=True)


def download_tree(box: boxkite.Client, remote: str, local: str) -> None:
    os.makedirs(local, exist_ok=True)
    for entry in box.ls(remote):
        if entry.is_dir:
            download_tree(box, remote + "/" + entry.name, os.path.join(local, entry.name))
        elif entry.is_file:
            box.download(remote + "/" + entry.name, os.path.join(local, entry.name))


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(work, "src")
        if len(sys.argv) <= 1:
            os.makedirs(os.path.join(src, "docs"))
            with open(os.path.join(src, "README"), "w") as f:
                f.write("hello\n")
            with open(os.path.join(src, "docs", "big.bin"), "wb") as f:
                f.write(os.urandom(9 << 20))  # three 4 MiB chunks
        with boxkite.Client.from_env() as box:
            if box.exists("roundtrip"):
                box.rm("roundtrip", recursive=True)
            upload_tree(box, src, "roundtrip")
            print("in the sandbox:", box.exec("cd roundtrip && find . -type f | sort").stdout_text.split())
            back = os.path.join(work, "back")
            download_tree(box, "roundtrip", back)
        same = tree_digests(src) == tree_digests(back)
        print("%d files back, identical: %s" % (len(tree_digests(back)), same))
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
