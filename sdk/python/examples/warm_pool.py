#!/usr/bin/env python3
"""The warm-pool recycle an orchestrator runs between tenants: snapshot the workspace, reset the
sandbox with the next tenant's key, and hand that tenant a sandbox restored from the snapshot.

    BOXKITE_URL=ipc:///run/boxkite/boxkited.sock BOXKITE_KEY_FILE=key python3 warm_pool.py NEXT_KEY_FILE

boxkited needs --sync-store (a file:// or s3:// store) and --state-dir; the new key only travels
over ipc:// or tls+tcp://. NEXT_KEY_FILE (new, mode 0600) receives the next tenant's key.
"""

import sys

import boxkite


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: warm_pool.py NEXT_KEY_FILE")
    with boxkite.Client.from_env() as box:
        box.upload(b"work of tenant 1\n", "notes.txt", overwrite=True)
        snap = box.sync.push()
        print("pushed %s: %d files" % (snap.snapshot, snap.files))

        next_key = boxkite.Key.generate("tenant-2")
        done = box.reset(new_key=next_key)
        next_key.write_key_file(sys.argv[1])
        print("reset: %d processes killed, %d entries removed" % (done.processes_killed, done.entries_removed))
        print("after the reset:", [e.name for e in box.ls(".")])

    # The next tenant, with its own key: the old one is refused from now on.
    with boxkite.Client.from_env(key_file=sys.argv[1]) as tenant:
        tenant.sync.pull(snap.snapshot)
        print("restored for tenant-2:", tenant.download("notes.txt").decode().strip())
    try:
        with boxkite.Client.from_env() as old:
            old.exec("true")
    except boxkite.UnauthenticatedError as e:
        print("the old key:", e.message)


if __name__ == "__main__":
    main()
