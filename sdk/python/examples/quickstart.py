#!/usr/bin/env python3
"""Run a command, upload a script, run it, fetch what it wrote.

    BOXKITE_URL=tcp://127.0.0.1:7700 BOXKITE_KEY_FILE=key python3 quickstart.py

(boxkited started with --listen tcp://127.0.0.1:7700 --key-file key; BOXKITE_TLS_CERT for a
tls+tcp:// URL, as bkctl reads them.)
"""

import boxkite

SCRIPT = b"""\
import sys
total = sum(int(line) for line in sys.stdin)
open("total.txt", "w").write("%d\\n" % total)
print("summed", total)
"""


def main() -> None:
    with boxkite.Client.from_env() as box:
        health = box.health()
        print("boxkited %s, sandbox ready: %s" % (health.version, health.sandbox_ready))

        r = box.exec("uname -s; id -u")
        print("exec:", r.stdout_text.split(), "exit", r.exit_code)

        box.upload(SCRIPT, "sum.py")
        r = box.exec(["python3", "sum.py"], stdin="1\n2\n3\n", check=True)
        print("script:", r.stdout_text.strip())
        print("total.txt:", box.download("total.txt").decode().strip())

        r = box.exec("exit 3")
        print("a failing command is a result:", r.describe())


if __name__ == "__main__":
    main()
