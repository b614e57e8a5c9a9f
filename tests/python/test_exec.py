"""Exec through the boxkite package's wire layer against a real boxkited (local mode, as root):
the second language runs a command in the sandbox and reads its whole result."""

import unittest

import boxkited_process

try:
    import boxkite
    from boxkite import wire
    from boxkite.errors import status_name
    from boxkite.v1 import boxkite_pb2 as pb
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ExecTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = boxkited_process.Boxkited().__enter__()
        cls.client = wire.Channel(cls.daemon.url, key=wire.load_key_file(cls.daemon.key_file), timeout=30.0)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def exec(self, **kw):
        reply = self.client.call("Exec", pb.ExecRequest(**kw), pb.ExecResponse)
        self.assertTrue(reply.verified, "an Exec answer must carry a valid MAC")
        return reply.message

    def test_id_is_the_sandbox_user(self):
        r = self.exec(argv=["id", "-u"])
        self.assertEqual((r.exit_code, r.signal, r.timed_out), (0, 0, False))
        self.assertEqual(r.stdout, b"1001\n")
        self.assertTrue(r.isolation_profile.startswith("bk1:netns-fresh"), r.isolation_profile)

    def test_shell_stdin_env_and_exit_code(self):
        r = self.exec(shell='read x; echo "$x $GREETING" ; echo oops >&2; exit 7', stdin=b"hello\n",
                      env=[pb.EnvVar(name="GREETING", value="world")], cwd="/tmp")
        self.assertEqual(r.exit_code, 7)
        self.assertEqual(r.stdout, b"hello world\n")
        self.assertEqual(r.stderr, b"oops\n")

    def test_timeout_and_truncation(self):
        r = self.exec(shell="head -c 100000 /dev/zero; sleep 30", timeout_ms=500, stdout_limit=1000)
        self.assertTrue(r.timed_out)
        self.assertEqual(len(r.stdout), 1000)
        self.assertTrue(r.stdout_truncated)
        self.assertEqual(r.stdout_dropped, 99000)

    def test_any_well_formed_variable_reaches_the_command(self):
        """The command runs unprivileged: loader and interpreter variables are its own business."""
        names = ["LD_PRELOAD", "PYTHONPATH", "NODE_OPTIONS", "PATH", "BOXKITE_X", "GIT_CONFIG_COUNT"]
        r = self.exec(argv=["/usr/bin/env"], env=[pb.EnvVar(name=n, value="/x-" + n) for n in names])
        self.assertEqual(r.exit_code, 0, r.stderr)
        for n in names:
            self.assertIn(("%s=/x-%s\n" % (n, n)).encode(), r.stdout)

    def test_an_ill_formed_variable_name_is_an_error_naming_it(self):
        for name in ("1ABC", "A-B", "A=B", ""):
            with self.subTest(name=name), self.assertRaises(boxkite.BoxkiteError) as cm:
                self.exec(argv=["true"], env=[pb.EnvVar(name=name, value="x")])
            self.assertEqual(status_name(cm.exception.code), "INVALID_ARGUMENT")
            self.assertIn("'%s'" % name, cm.exception.message)

if __name__ == "__main__":
    unittest.main()
