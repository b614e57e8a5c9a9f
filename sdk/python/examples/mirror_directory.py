#!/usr/bin/env python3
"""Keep a local copy of a sandbox directory up to date as it changes (FileWatch).

    BOXKITE_URL=tcp://127.0.0.1:7700 BOXKITE_KEY_FILE=key python3 mirror_directory.py [DIR]

Watches /workspace/DIR (default: mirror) and copies it into a local temporary directory, then
applies each change as it comes: a file written, removed or renamed, a directory made or gone;
on an overflow (changes came faster than they were read) it copies the whole tree again. It stops
when a file named STOP appears at the top of DIR (it says "watching DIR" once it waits for it),
and prints each file of its copy with its SHA-256. The order is the one to follow: first the watch, then the copy, then the events —
nothing that changes after the watch started is missed.
"""

import hashlib
import os
import shutil
import sys
import tempfile

import boxkite
from boxkite import WatchEventKind as Kind


def copy_tree(box: boxkite.Client, remote: str, local: str) -> None:
    """The whole tree again, as it is now. Gone meanwhile: the event that says so comes next."""
    shutil.rmtree(local, ignore_errors=True)
    os.makedirs(local)
    try:
        entries = box.ls(remote)
    except (boxkite.NotFoundError, boxkite.FailedPreconditionError):
        return
    for entry in entries:
        if entry.is_dir:
            copy_tree(box, remote + "/" + entry.name, os.path.join(local, entry.name))
        elif entry.is_file:
            fetch(box, remote + "/" + entry.name, os.path.join(local, entry.name))


def fetch(box: boxkite.Client, remote: str, local: str) -> None:
    """One file's content now. Gone meanwhile: the event that says so comes next."""
    os.makedirs(os.path.dirname(local), exist_ok=True)
    try:
        box.download(remote, local)
    except (boxkite.NotFoundError, boxkite.FailedPreconditionError):
        pass


def remove(local: str) -> None:
    if os.path.isdir(local) and not os.path.islink(local):
        shutil.rmtree(local)
    elif os.path.lexists(local):
        os.unlink(local)


def apply(box: boxkite.Client, remote: str, local: str, ev: boxkite.WatchEvent) -> None:
    there, here = remote + "/" + ev.path, os.path.join(local, ev.path)
    if ev.kind == Kind.CREATED and ev.directory:
        os.makedirs(here, exist_ok=True)
    elif ev.kind in (Kind.CREATED, Kind.CLOSED) and not ev.directory:
        # A file's content is whole once its writer closed it; one that appeared with a directory
        # moved in, or already written, is fetched as it is.
        fetch(box, there, here)
    elif ev.kind == Kind.REMOVED:
        remove(here)
    elif ev.kind == Kind.MOVED:
        # Whatever this copy had under the old name may be behind (a write whose CLOSED came
        # once it was renamed could not be fetched): the new name, as it is now.
        if ev.path:
            remove(here)
        if ev.to and ev.directory:
            copy_tree(box, remote + "/" + ev.to, os.path.join(local, ev.to))
        elif ev.to:
            fetch(box, remote + "/" + ev.to, os.path.join(local, ev.to))


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else "mirror"
    with boxkite.Client.from_env() as box, tempfile.TemporaryDirectory() as local:
        box.mkdir(directory, parents=True)
        with box.watch(directory) as watch:
            print("watching %s (%d directories)" % (directory, watch.directories), flush=True)
            copy_tree(box, directory, local)
            for ev in watch:
                if ev.kind == Kind.OVERFLOW:
                    copy_tree(box, directory, local)
                elif "STOP" in (ev.path, ev.to):
                    break
                else:
                    apply(box, directory, local, ev)
        for here, _, files in sorted(os.walk(local)):
            for name in sorted(files):
                path = os.path.join(here, name)
                with open(path, "rb") as f:
                    print(os.path.relpath(path, local), hashlib.sha256(f.read()).hexdigest())


if __name__ == "__main__":
    main()
