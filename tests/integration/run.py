"""Run a Python test tier: every test_*.py of a directory (default: this one, the integration
tier of make test-integration; make test-files and make test-python run tests/files and
tests/python through it too).

Prints one line per test, then a "SKIP <test>: <reason>" line for each test that could not run
(a skip is never a pass; a class or module that skipped as a whole counts as the tests it holds),
the slowest tests, and one summary line "<tier>: N passed, N failed, N skipped". Exits 1 on any
failure or error, or when no test was found. With $BOXKITE_TEST_RESULTS set (tests/tests.mk sets
it), the number of skipped tests is also written to $BOXKITE_TEST_RESULTS/<tier>.skipped and the
tier's time to <tier>.seconds, for make test's last lines. For the integration tier, whatever
happens, everything the tests started is undone (bkit.cleanup_all).

A test (with its setUp and tearDown), and what runs between two tests (a class's or a module's
set-up and tear-down), has --timeout seconds ($BOXKITE_TEST_TIMEOUT, 600 unless set; 0: none):
then the traceback of every thread is printed (faulthandler), and the test fails with
TestTimeout raised where it hung, so that the run goes on and its clean-up still happens.

usage: run.py [--tier NAME] [--dir DIR] [--timeout SECONDS] [-k PATTERN]... [MODULE]...
       (PATTERN as unittest's -k; MODULEs, e.g. test_bkctl, instead of every test_*.py)
"""
import argparse
import faulthandler
import os
import re
import signal
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))


class TestTimeout(Exception):
    """A test, or a class's or module's set-up or tear-down, ran past --timeout."""


class Watchdog:
    """One deadline at a time: at it, every thread's traceback on stderr (faulthandler), and a
    second later TestTimeout raised in the main thread, where the test hangs."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.what = None
        if seconds:
            signal.signal(signal.SIGALRM, self._expired)

    def _expired(self, signum, frame):
        raise TestTimeout(f"{self.what}: still running after {self.seconds} s (tracebacks above)")

    def arm(self, what):
        self.disarm()
        if not self.seconds:
            return
        self.what = what
        faulthandler.dump_traceback_later(self.seconds, exit=False)
        signal.alarm(self.seconds + 1)

    def disarm(self):
        if self.seconds:
            faulthandler.cancel_dump_traceback_later()
            signal.alarm(0)


class Result(unittest.TextTestResult):
    watchdog = Watchdog(0)

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.passed = []
        self.durations = []
        self._started = None

    def startTest(self, test):
        self.watchdog.arm(test.id())
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        self.durations.append((time.monotonic() - self._started, test.id()))
        # What runs before the next test (a tear-down of this class, a set-up of the next) has a
        # deadline of its own.
        self.watchdog.arm(f"after {test.id()}: a class's or module's tear-down or set-up")

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test)


def tests_of(suite):
    """Every test case in a (nested) suite."""
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from tests_of(t)
        else:
            yield t


def count_tests(suite):
    """Tests per class ("module.Class") and per module, counted before the run (which empties
    the suite)."""
    per_class, per_module = {}, {}
    for t in tests_of(suite):
        cls = type(t)
        name = f"{cls.__module__}.{cls.__qualname__}"
        per_class[name] = per_class.get(name, 0) + 1
        per_module[cls.__module__] = per_module.get(cls.__module__, 0) + 1
    return per_class, per_module


def skip_lines(result, per_class, per_module):
    """(number of tests, line) for each skip: a skip raised by setUpClass or setUpModule stands
    for every test of that class or module in the suite; a skipped subTest for itself."""
    out = []
    for test, reason in result.skipped:
        reason = re.sub(r"^SKIP:\s*", "", str(reason))
        count, what = 1, test.id()
        m = re.match(r"^(setUpClass|setUpModule) \((.*)\)$", str(test))
        if m:
            count = (per_class if m.group(1) == "setUpClass" else per_module).get(m.group(2), 1)
            what = f"{m.group(2)} ({count} test{'s' if count != 1 else ''})"
        out.append((count, f"SKIP {what}: {reason}"))
    return out


def write_result(tier, what, value):
    """$BOXKITE_TEST_RESULTS/<tier>.<what> (skipped, seconds), for make test's last lines."""
    where = os.environ.get("BOXKITE_TEST_RESULTS")
    if not where:
        return
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, f"{tier}.{what}"), "w") as f:
        f.write(f"{value}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tier", default="integration", help="its name in the output")
    ap.add_argument("--dir", default=HERE, help="the directory of test_*.py (default: this one)")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("BOXKITE_TEST_TIMEOUT") or 600),
                    help="seconds a test may take before its traceback is printed and it fails (0: none)")
    ap.add_argument("-k", action="append", default=[], help="only tests matching this pattern")
    ap.add_argument("modules", nargs="*", help="only these test modules")
    opts = ap.parse_args()

    top = os.path.abspath(opts.dir)
    tier = f"test-{opts.tier}"
    # The integration tier's machinery: temp dirs and network namespaces of a killed run swept
    # first, everything a test started undone at the end.
    kit = None
    if top == HERE:
        sys.path.insert(0, HERE)
        import bkit
        kit = bkit
    loader = unittest.TestLoader()
    if opts.k:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in opts.k]
    if opts.modules:
        if top not in sys.path:
            sys.path.insert(0, top)
        suite = loader.loadTestsFromNames(opts.modules)
    else:
        suite = loader.discover(top, pattern="test_*.py", top_level_dir=top)
    per_class, per_module = count_tests(suite)
    t0 = time.monotonic()
    Result.watchdog = Watchdog(opts.timeout)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Result, stream=sys.stdout)
    try:
        if kit:
            kit.sweep_stale_netns()
            kit.sweep_stale_temp_dirs()
        Result.watchdog.arm("before the first test: a module's or class's set-up")
        result = runner.run(suite)
    except (KeyboardInterrupt, TestTimeout) as e:
        print(f"\n{tier}: interrupted ({e}): cleaning up", file=sys.stderr)
        if kit:
            kit.cleanup_all()
        return 130
    finally:
        Result.watchdog.disarm()
        if kit:
            kit.cleanup_all()
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    # A sanitizer's report in a daemon's log (the SAN=1 run of the integration tier) fails it,
    # whatever the test that ran it saw.
    for report in (kit.SANITIZER_REPORTS if kit else []):
        print(f"SANITIZER {report}", file=sys.stderr)
        failed += 1
    skips = skip_lines(result, per_class, per_module)
    skipped = sum(n for n, _ in skips)
    for _, line in skips:
        print(line)
    slowest = sorted(result.durations, reverse=True)[:3]
    if slowest:
        print("slowest: " + ", ".join(f"{name} {secs:.1f} s" for secs, name in slowest))
    seconds = time.monotonic() - t0
    print(f"{tier}: {len(result.passed)} passed, {failed} failed, {skipped} skipped in {seconds:.1f} s")
    write_result(opts.tier, "skipped", skipped)
    write_result(opts.tier, "seconds", f"{seconds:.1f}")
    if result.testsRun == 0 and not skipped:
        print(f"{tier}: no test found", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
