#!/usr/bin/env python3
"""tests/integration/run.py, the runner of every Python tier, on a tier made here: a test that
hangs past --timeout prints the traceback of where it hangs and fails while the others still
run; -k runs one test; the tier's time and skips are written beside each other for make test's
table; a filter that matches nothing fails."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "integration" / "run.py"

TIER = '''import time
import unittest


class Hangs(unittest.TestCase):
    def test_waits_for_ever(self):
        time.sleep(3600)  # the line the traceback must name

    def test_passes(self):
        pass


class Skips(unittest.TestCase):
    def test_cannot_run_here(self):
        self.skipTest("not here")
'''


def run(tmp, *args):
    env = dict(os.environ, BOXKITE_TEST_RESULTS=str(tmp / "results"))
    env.pop("BOXKITE_TEST_TIMEOUT", None)
    return subprocess.run([sys.executable, str(RUN), "--tier", "selftest", "--dir", str(tmp / "tier"), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        (tmp / "tier").mkdir()
        (tmp / "tier" / "test_hang.py").write_text(TIER)

        r = run(tmp, "--timeout", "2")
        if r.returncode != 1 or "test-selftest: 1 passed, 1 failed, 1 skipped" not in r.stdout:
            failures.append(f"a hung test did not fail alone (exit {r.returncode}):\n{r.stdout}")
        if "test_hang.py\", line 7 in test_waits_for_ever" not in r.stderr:
            failures.append(f"no traceback naming where the test hangs:\n{r.stderr}")
        if "TestTimeout" not in r.stdout or "still running after 2 s" not in r.stdout:
            failures.append(f"the hung test's failure does not say it timed out:\n{r.stdout}")
        results = tmp / "results"
        seconds = (results / "selftest.seconds").read_text().strip() if (results / "selftest.seconds").exists() else ""
        skipped = (results / "selftest.skipped").read_text().strip() if (results / "selftest.skipped").exists() else ""
        if skipped != "1" or not seconds or not 2 <= float(seconds) < 60:
            failures.append(f"selftest.skipped {skipped!r} and selftest.seconds {seconds!r} are not 1 and ~2-3 s")

        r = run(tmp, "-k", "test_passes")
        if r.returncode != 0 or "test-selftest: 1 passed, 0 failed, 0 skipped" not in r.stdout:
            failures.append(f"-k test_passes did not run that one test alone (exit {r.returncode}):\n{r.stdout}")

        r = run(tmp, "-k", "no_test_is_named_this")
        if r.returncode != 1 or "no test found" not in r.stderr:
            failures.append(f"a filter that matches nothing passed (exit {r.returncode}):\n{r.stderr}")
    for f in failures:
        print(f"test_runner: {f}")
    print(f"test_runner: {3 - min(len(failures), 3)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
