#!/usr/bin/env python3
"""The warm-pool recycle an orchestrator runs between tenants, and a tenant's work handed back.

    BOXKITE_URL=ipc:///run/boxkite/boxkited.sock BOXKITE_KEY_FILE=key python3 warm_pool.py NEXT_KEY_FILE

Tenant A (BOXKITE_KEY_FILE's key) snapshots its workspace; a Reset gives the sandbox to tenant B
(a fresh key, saved to NEXT_KEY_FILE, mode 0600), who finds nothing of A's: an empty sandbox and
no snapshot (each key's snapshots are its own, docs/PROTOCOL.md "Whose snapshots"); then another
Reset gives the sandbox back to A, whose snapshot is where it was. boxkited needs --sync-store and
--state-dir; a new key only travels over ipc:// or tls+tcp://.
"""

import sys

import boxkite


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: warm_pool.py NEXT_KEY_FILE")
    with boxkite.Client.from_env() as a:
        key_a = a.channel.key
        assert key_a is not None, "BOXKITE_KEY_FILE names tenant A's key"
        a.upload(b"work of tenant A\n", "notes.txt", overwrite=True)
        snap = a.sync.push()
        print("A pushed %s: %d files" % (snap.snapshot, snap.files))

        key_b = boxkite.Key.generate("tenant-b")
        key_b.write_key_file(sys.argv[1])
        done = a.reset(new_key=key_b)
        print("reset for B: %d processes killed, %d entries removed" % (done.processes_killed, done.entries_removed))

    with boxkite.Client.from_env(key_file=sys.argv[1]) as b:
        print("B finds:", [e.name for e in b.ls(".")], "snapshots:", [s.name for s in b.sync.list()])
        b.reset(new_key=key_a)
        print("reset for A again")

    with boxkite.Client.from_env() as a:
        a.sync.pull(snap.snapshot)
        print("A's work is back:", a.download("notes.txt").decode().strip())
    try:
        with boxkite.Client.from_env(key_file=sys.argv[1]) as b:
            b.exec("true")
    except boxkite.UnauthenticatedError as e:
        print("B's key now:", e.message)


if __name__ == "__main__":
    main()
