"""Shutdown: boxkited stops on SIGTERM with uploads open (one half sent, one whole but not
committed) and a download just made: it exits 0 within 5 s, nothing it started outlives it, and
nothing of the open uploads lands."""

import os
import unittest

from fileskit import CHUNK_MAX, Daemon, Files, sha256, skip_reason, wire


class ShutdownTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        why = skip_reason()
        if why:
            raise unittest.SkipTest("SKIP: " + why)

    def test_sigterm_with_uploads_open(self):
        d = Daemon()
        self.addCleanup(d.stop)
        d.__enter__()
        ws = d.workspace
        fs = Files(d.port, wire.load_key_file(d.key_file))
        self.addCleanup(fs.close)
        data = os.urandom(2 * CHUNK_MAX)
        half = fs.begin("half.bin", len(data), sha256(data))
        fs.chunk(half.upload_id, 0, data[:CHUNK_MAX])
        whole = fs.begin("whole.bin", len(data), sha256(data))
        fs.send(whole.upload_id, data)
        fs.upload("done.bin", b"done\n")
        self.assertEqual(fs.download("done.bin")[0], b"done\n")
        fs.close()
        dir_keep, d.dir = d.dir, None  # keep the workspace to look at it after the stop
        try:
            status = d.stop(term_wait=5.0)
            hung, leftover = d.hung, d.leftover
            names = sorted(os.listdir(ws))
        finally:
            d.dir = dir_keep
            d.stop()
        self.assertEqual(names, ["done.bin"], "an open upload landed at shutdown")
        self.assertEqual({"hung": hung, "leftover": leftover, "status": status},
                         {"hung": False, "leftover": [], "status": 0},
                         "hung: did not exit within 5 s of SIGTERM; leftover: processes that outlived it")


if __name__ == "__main__":
    unittest.main()
