"""Run the integration tier (make test-integration): every tests/integration/test_*.py.

Prints one line per test, a "SKIP <test>: <reason>" line for each test that could not run (a
skip is never a pass), and "N passed, N failed, N skipped". Exits 1 on any failure or error.
Whatever happens, everything the tests started is undone (bkit.cleanup_all).

usage: run.py [-k PATTERN]...   (PATTERN as unittest's -k)
"""
import argparse
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bkit  # noqa: E402


class Result(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.passed = []
        self._started = {}

    def startTest(self, test):
        self._started[test.id()] = time.monotonic()
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.stream.writeln(f"SKIP {test.id()}: {reason}")
        self.stream.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", action="append", default=[], help="only tests matching this pattern")
    opts = ap.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    loader = unittest.TestLoader()
    if opts.k:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in opts.k]
    suite = loader.discover(here, pattern="test_*.py", top_level_dir=here)
    t0 = time.monotonic()
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Result, stream=sys.stdout)
    try:
        bkit.sweep_stale_netns()
        bkit.sweep_stale_temp_dirs()
        result = runner.run(suite)
    except KeyboardInterrupt as e:
        print(f"\ntest-integration: interrupted ({e}): cleaning up", file=sys.stderr)
        bkit.cleanup_all()
        return 130
    finally:
        bkit.cleanup_all()
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    for test, reason in result.skipped:
        print(f"SKIP {test.id()}: {reason}")
    print(f"test-integration: {len(result.passed)} passed, {failed} failed, {skipped} skipped "
          f"in {time.monotonic() - t0:.1f} s")
    if result.testsRun == 0 and not skipped:
        print("test-integration: no test found", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
