"""The wedge of issue 8, reproduced: many large orders to the executor and many large answers
from it at the same time -- a dozen FileList clients on a directory of long names (pages of about
256 KiB) beside a dozen Exec clients sending orders of about 500 KiB (argv and environment, both
within the limits). Before the channel was non-blocking, a sender held the link's lock across a
blocking send while the executor blocked sending a List page back: boxkited stopped answering,
Health included, exec timeouts stopped firing and SIGTERM was ignored.

Asserted here: every call is answered (with its real result), Health keeps answering throughout,
an exec's timeout fires meanwhile, and boxkited then stops on SIGTERM by itself. Every wait is a
hang guard (a call's socket timeout, a join's timeout): nothing is timed.
"""
import threading
import time
import unittest

import bkit
import boxkite
from boxkite import wire
from boxkite.v1 import boxkite_pb2 as pb

LIST_CLIENTS = 12
EXEC_CLIENTS = 12
ROUNDS = 6             # calls per client
NAMES = 1000           # entries of 250-byte names: ~250 KiB of names per 1000-entry page
ARGV_BYTES = 250_000   # the front's limit is 256 KiB for argv and 256 KiB for the environment
ENV_BYTES = 250_000
CALL_GUARD = 60        # seconds any one call may take before the test calls it unanswered


def setUpModule():
    bkit.require_root()
    bkit.require_build()


def client(d):
    return wire.Channel(d.tcp_url, key=wire.load_key_file(d.key), timeout=CALL_GUARD)


class Wedge(unittest.TestCase):
    def setUp(self):
        self.d = bkit.Daemon("wedge", tcp=("127.0.0.1", bkit.free_tcp_port())).start()
        long_dir = self.d.workspace / "long"
        long_dir.mkdir()
        self.names = sorted("%04d" % i + "n" * 246 for i in range(NAMES))
        for n in self.names:
            (long_dir / n).touch()
        self.failures = []
        self.lock = threading.Lock()

    def fail_later(self, what):
        with self.lock:
            self.failures.append(what)

    def lister(self, i):
        with client(self.d) as c:
            for r in range(ROUNDS):
                got, token = [], ""
                while True:
                    try:
                        rep = c.call("FileList", pb.FileListRequest(path="long", page_size=1000, page_token=token),
                                     pb.FileListResponse)
                    except boxkite.BoxkiteError as e:
                        return self.fail_later(f"lister {i} round {r}: {e}")
                    got += [e.path for e in rep.message.entries]
                    token = rep.message.next_page_token
                    if not token:
                        break
                if got != self.names:
                    return self.fail_later(f"lister {i} round {r}: {len(got)} names, not the {NAMES} made")

    def executor(self, i):
        # argv: `true` and 250 args of 1000 bytes; env: 250 variables of ~1000 bytes.
        argv = ["true"] + ["a%d" % i + "x" * 998 for _ in range(ARGV_BYTES // 1000)]
        env = [pb.EnvVar(name="V%d" % k, value="v" * 995) for k in range(ENV_BYTES // 1000)]
        with client(self.d) as c:
            for r in range(ROUNDS):
                try:
                    rep = c.call("Exec", pb.ExecRequest(argv=argv, env=env), pb.ExecResponse)
                except boxkite.BoxkiteError as e:
                    return self.fail_later(f"exec client {i} round {r}: {e}")
                if rep.message.exit_code != 0 or rep.message.timed_out:
                    return self.fail_later(f"exec client {i} round {r}: {rep.message}")

    def test_large_orders_and_large_answers_at_once(self):
        stop = threading.Event()
        health = {"answered": 0, "failed": []}

        def prober():
            with wire.Channel(self.d.tcp_url, timeout=CALL_GUARD) as c:
                while not stop.is_set():
                    try:
                        c.call("Health", pb.HealthRequest(), pb.HealthResponse)
                        health["answered"] += 1
                    except boxkite.BoxkiteError as e:
                        health["failed"].append(str(e))
                    time.sleep(0.05)

        timed_out = {}

        def sleeper():
            with client(self.d) as c:
                try:
                    rep = c.call("Exec", pb.ExecRequest(argv=["sleep", "60"], timeout_ms=1000), pb.ExecResponse)
                    timed_out["result"] = rep.message.timed_out
                except boxkite.BoxkiteError as e:
                    timed_out["error"] = str(e)

        threads = [threading.Thread(target=self.lister, args=(i,)) for i in range(LIST_CLIENTS)]
        threads += [threading.Thread(target=self.executor, args=(i,)) for i in range(EXEC_CLIENTS)]
        probe = threading.Thread(target=prober)
        probe.start()
        for t in threads:
            t.start()
        # The timeout is to fire while the load runs, not after it.
        time.sleep(0.5)
        sleep_thread = threading.Thread(target=sleeper)
        sleep_thread.start()
        for t in threads + [sleep_thread]:
            t.join(timeout=CALL_GUARD * ROUNDS * 3)
        stuck = sum(t.is_alive() for t in threads + [sleep_thread])
        stop.set()
        probe.join(timeout=CALL_GUARD + 5)
        self.assertEqual(stuck, 0, "clients still waiting for answers: boxkited is wedged")
        self.assertEqual(self.failures, [])
        self.assertEqual(timed_out, {"result": True}, "the exec's 1 s timeout did not fire under load")
        self.assertEqual(health["failed"], [], "Health went unanswered under load")
        self.assertGreater(health["answered"], 0)
        self.d.stop()
        self.assertFalse(self.d.stop_escalated, "boxkited did not stop on SIGTERM by itself")


if __name__ == "__main__":
    unittest.main()
