"""The never-twice promise across restarts (docs/PROTOCOL.md, "Replay"): a captured Exec
envelope re-sent to a restarted boxkited, inside its time window, is refused REPLAYED and the
command ran once — after a clean stop and after a crash (SIGKILL). Sent from the boxkite
package's wire layer, byte for byte the envelope that was captured."""

import os
import signal
import unittest

import boxkited_process

try:
    import boxkite
    from boxkite import wire
    from boxkite.errors import detail_name, status_name
    from boxkite.v1 import boxkite_pb2 as pb
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ReplayAcrossRestartTest(unittest.TestCase):
    def setUp(self):
        self.daemon = boxkited_process.Boxkited().__enter__()
        self.addCleanup(self.daemon.stop)
        self.key = wire.load_key_file(self.daemon.key_file)
        self.ran = os.path.join(self.daemon.workspace, "ran.log")

    def client(self):
        c = wire.Channel(self.daemon.url, key=self.key, timeout=30.0)
        self.addCleanup(c.close)
        return c

    def runs(self):
        with open(self.ran) as f:
            return f.read().count("ran\n")

    def send(self, client, env):
        return client.open_answer(client.exchange(env.SerializeToString()), env, pb.ExecResponse)

    def captured_exec(self):
        c = self.client()
        env = c.seal("Exec", pb.ExecRequest(shell="echo ran >> /workspace/ran.log"))
        r = self.send(c, env)
        self.assertEqual((r.message.exit_code, r.verified), (0, True))
        self.assertEqual(self.runs(), 1)
        return env

    def assert_replay_refused(self, env):
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            self.send(self.client(), env)
        e = cm.exception
        self.assertEqual((status_name(e.code), detail_name(e.detail)),
                         ("UNAUTHENTICATED", "REPLAYED"), e.message)
        self.assertTrue(e.verified, "a refusal after the MAC verified is MAC'd")
        self.assertEqual(self.runs(), 1, "the captured command ran a second time")

    def test_replay_after_a_clean_restart_is_refused(self):
        env = self.captured_exec()
        self.assertEqual(self.daemon.restart(), 0, self.daemon.log())
        self.assert_replay_refused(env)

    def test_replay_after_a_crash_is_refused(self):
        env = self.captured_exec()
        self.daemon.restart(signal.SIGKILL)
        self.assert_replay_refused(env)
        # ...and again after a second restart: the restored record is itself kept.
        self.daemon.restart()
        self.assert_replay_refused(env)

    def test_fresh_requests_after_a_restart_run(self):
        self.captured_exec()
        self.daemon.restart()
        c = self.client()
        for _ in range(3):
            r = c.call("Exec", pb.ExecRequest(shell="echo ran >> /workspace/ran.log"), pb.ExecResponse)
            self.assertEqual(r.message.exit_code, 0)
        self.assertEqual(self.runs(), 4)

    def test_the_state_directory_is_private(self):
        state = os.path.join(self.daemon.dir, "state")
        st = os.stat(state)
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o700))
        logs = sorted(n for n in os.listdir(state) if n.startswith("replay."))
        self.assertEqual(logs, ["replay.0", "replay.1", "replay.2"])
        for n in logs:
            self.assertEqual(os.stat(os.path.join(state, n)).st_mode & 0o777, 0o600, n)


if __name__ == "__main__":
    unittest.main()
