"""The operator's terminal. boxkited started from an interactive shell (as the README's
walkthrough and `KEEP=1 make run` do) has that terminal as its stdio and controlling terminal: a
sandboxed command must not be able to type into it (TIOCSTI: the keystrokes would run as root
in the operator's shell) nor write on it. Here boxkited runs on a real pty as its session's
controlling terminal, and everything that reaches the pty is watched from its other end.
"""
import errno
import fcntl
import os
import pty
import secrets
import termios
import threading
import time
import unittest

import bkit

D = None
MASTER = SLAVE = None
SEEN = bytearray()  # everything written to the terminal, as its other end reads it
SEEN_LOCK = threading.Lock()


def drain():
    while True:
        try:
            data = os.read(MASTER, 65536)
        except OSError as e:
            if e.errno == errno.EIO:  # every slave closed
                return
            raise
        if not data:
            return
        with SEEN_LOCK:
            SEEN.extend(data)


def setUpModule():
    global D, MASTER, SLAVE
    bkit.require_root()
    bkit.require_build()
    MASTER, SLAVE = pty.openpty()
    bkit.defer(os.close, MASTER)
    bkit.defer(os.close, SLAVE)
    threading.Thread(target=drain, daemon=True).start()
    D = bkit.Daemon("tty", tty=SLAVE).start()
    D.install_probe()


def seen():
    time.sleep(0.3)  # let the drain thread read what is there (an absence is what is checked)
    with SEEN_LOCK:
        return bytes(SEEN)


def typed_ahead():
    """Bytes waiting in the terminal's input queue: what TIOCSTI would have pushed."""
    buf = bytearray(4)
    fcntl.ioctl(SLAVE, termios.FIONREAD, buf)
    return int.from_bytes(buf, "little")


class OperatorsTerminal(bkit.ProbeAssertions, unittest.TestCase):
    def test_control_the_terminal_is_watched(self):
        """The harness sees what reaches the terminal, and boxkited really has it as its
        controlling terminal (else the attacks below would prove nothing)."""
        mark = f"bk-control-{secrets.token_hex(4)}"
        os.write(SLAVE, mark.encode() + b"\n")
        self.assertIn(mark.encode(), seen())
        fields = open(f"/proc/{D.front_pid()}/stat").read().rsplit(")", 1)[1].split()
        self.assertEqual(int(fields[4]), os.stat(os.ttyname(SLAVE)).st_rdev, "boxkited's tty_nr is the pty")

    def test_a_command_can_neither_type_nor_write_into_it(self):
        mark = f"BKTTY{secrets.token_hex(6)}"
        r = self.assertDenied(D, "tty", mark, reason=None)
        self.assertEqual(r.reason, "dev-tty=no-ctty,TIOCSTI=EPERM,TIOCSTI-high-bits=EPERM,TIOCSETD=EPERM",
                         r.describe())
        # The same from a shell, as an agent's command would try it.
        rc, res, err = D.exec_json("--shell", f"printf {mark}-sh > /dev/tty; echo rc=$?; "
                                   f"python3 -c 'import fcntl, termios, sys; fcntl.ioctl(sys.stdin, termios.TIOCSTI, b\"x\")'"
                                   f" 2>&1 | tail -1")
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertIn("cannot create /dev/tty: No such device or address", res["stderr"], res)
        self.assertEqual(res["stdout"].split("\n")[:2], ["rc=2", "PermissionError: [Errno 1] Operation not permitted"],
                         res)
        self.assertNotIn(mark.encode(), seen(), "the command wrote on the operator's terminal")
        self.assertEqual(typed_ahead(), 0, "bytes were pushed into the operator's terminal input")

    def test_the_sidecars_processes_keep_the_terminal_but_the_sandbox_does_not(self):
        tty = os.stat(os.ttyname(SLAVE)).st_rdev
        init = D.local_init_pid()
        fields = open(f"/proc/{init}/stat").read().rsplit(")", 1)[1].split()
        self.assertEqual(int(fields[4]), 0, "the sandbox init has the operator's terminal")
        for fd in (0, 1, 2):
            self.assertEqual(os.readlink(f"/proc/{init}/fd/{fd}"), "/dev/null")
        self.assertNotEqual(tty, 0)


if __name__ == "__main__":
    unittest.main()
