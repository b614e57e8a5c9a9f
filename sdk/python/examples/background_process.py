#!/usr/bin/env python3
"""Drive background processes: a shell on a terminal (write, read, resize, wait), and a dev server
(its port exposed to previews) stopped with a signal.

    BOXKITE_URL=tcp://127.0.0.1:7700 BOXKITE_KEY_FILE=key python3 background_process.py
"""

import signal
import time

import boxkite


def read_line_with(p: boxkite.Process, needle: bytes) -> str:
    """The line of p's output holding needle, once it came (the rest of what came is dropped)."""
    seen = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = p.read(wait=5)
        seen += r.stdout.data
        for line in seen.split(b"\n"):
            if needle in line:
                return line.rstrip(b"\r").decode()
        if r.ended:
            break
    raise RuntimeError("the terminal never showed %r: %r" % (needle, seen))


def main() -> None:
    with boxkite.Client.from_env() as box:
        # A shell on a 24x80 terminal (no prompt: PS1 empty); a lease so that it dies if this
        # script does.
        with box.start(["sh"], env={"PS1": ""}, tty=True, stdin=True, size=(24, 80), lease=30) as sh:
            sh.write("stty size\n")
            print("terminal:", read_line_with(sh, b"24 80"))
            sh.resize(40, 120)
            sh.write("stty size\n")
            print("resized:", read_line_with(sh, b"40 120"))
            sh.write("exit 3\n")
            print("the shell", sh.wait(30).describe())

        # A dev server in the sandbox's own network namespace, where previews reach its port;
        # stopped with SIGTERM, and SIGKILL 5 s later if it ignored it.
        server = box.start(["python3", "-u", "-m", "http.server", "8000"], expose_port=8000, tag="dev server",
                           lease=30)
        print("started", server.id, "->", read_line_with(server, b"Serving HTTP"))
        print("listed:", [(p.process_id, p.tag, p.expose_port) for p in box.processes() if p.process_id == server.id])
        server.signal(signal.SIGTERM, kill_after=5)
        print("the server", server.wait(30).describe())
        server.remove()


if __name__ == "__main__":
    main()
