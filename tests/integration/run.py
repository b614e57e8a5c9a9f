"""Run a Python test tier: every test_*.py of a directory (default: this one, the integration
tier of make test-integration; make test-files and make test-python run tests/files and
tests/python through it too).

Prints one line per test, then a "SKIP <test>: <reason>" line for each test that could not run
(a skip is never a pass; a class or module that skipped as a whole counts as the tests it holds),
and one summary line "<tier>: N passed, N failed, N skipped". Exits 1 on any failure or error,
or when no test was found. With $BOXKITE_TEST_RESULTS set (tests/tests.mk sets it), the number of
skipped tests is also written to $BOXKITE_TEST_RESULTS/<tier>.skipped, for make test's last line.
For the integration tier, whatever happens, everything the tests started is undone
(bkit.cleanup_all).

usage: run.py [--tier NAME] [--dir DIR] [-k PATTERN]... [MODULE]...
       (PATTERN as unittest's -k; MODULEs, e.g. test_8_bkctl, instead of every test_*.py)
"""
import argparse
import os
import re
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))


class Result(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.passed = []

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


def write_skip_count(tier, skipped):
    where = os.environ.get("BOXKITE_TEST_RESULTS")
    if not where:
        return
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, f"{tier}.skipped"), "w") as f:
        f.write(f"{skipped}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tier", default="integration", help="its name in the output")
    ap.add_argument("--dir", default=HERE, help="the directory of test_*.py (default: this one)")
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
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Result, stream=sys.stdout)
    try:
        if kit:
            kit.sweep_stale_netns()
            kit.sweep_stale_temp_dirs()
        result = runner.run(suite)
    except KeyboardInterrupt as e:
        print(f"\n{tier}: interrupted ({e}): cleaning up", file=sys.stderr)
        if kit:
            kit.cleanup_all()
        return 130
    finally:
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
    print(f"{tier}: {len(result.passed)} passed, {failed} failed, {skipped} skipped "
          f"in {time.monotonic() - t0:.1f} s")
    write_skip_count(opts.tier, skipped)
    if result.testsRun == 0 and not skipped:
        print(f"{tier}: no test found", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
