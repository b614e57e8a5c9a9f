#!/usr/bin/env python3
"""scripts/link-cycles (make layout-check) fails on a cycle and passes without one: object files
compiled here, in a temporary directory, so the check is shown to be able to fail."""
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "link-cycles"

# a -> b -> c, and c -> a only in the cyclic variant.
SOURCES = {
    "a.c": "int b(void); int a(void) { return b() + 1; }\n",
    "b.c": "int c(void); int b(void) { return c() + 1; }\n",
    "c_leaf.c": "int c(void) { return 1; }\n",
    "c_back.c": "int a(void); int c(void) { return a() + 1; }\n",
}


def compile_all(d):
    for name, text in SOURCES.items():
        (d / name).write_text(text)
        subprocess.run(["cc", "-c", "-o", str(d / (name[:-2] + ".o")), str(d / name)], check=True)


def check(d, objs):
    return subprocess.run([sys.executable, str(CHECK), "test", *[str(d / o) for o in objs]],
                          capture_output=True, text=True)


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        compile_all(d)
        r = check(d, ["a.o", "b.o", "c_leaf.o"])
        if r.returncode != 0:
            print(f"link_cycles: a chain without a cycle was refused:\n{r.stderr}")
            failures += 1
        r = check(d, ["a.o", "b.o", "c_back.o"])
        named = all(o in r.stderr for o in ("a.o", "b.o", "c_back.o"))
        if r.returncode != 1 or "3 objects link in a cycle" not in r.stderr or not named:
            print(f"link_cycles: a cycle a -> b -> c -> a was not reported (exit {r.returncode}):\n{r.stderr}")
            failures += 1
    print(f"link_cycles: {2 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
