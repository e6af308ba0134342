#!/usr/bin/env python3
"""test-times.py - runs a test command (`make test`'s), passes its output through, and ends
with one line: the total wall time and the five slowest tests with their times; every
test's time goes to target/test-times.tsv, slowest first.

Usage: test-times.py -- COMMAND [ARG...]

The command's stderr is merged into its stdout (cargo prints "Running <binary>" there).
A test's time is the time from the previous result line of its test binary (or the
binary's start) to its own result line. The root and kernel tests run one at a time
(--test-threads=1), so theirs are exact; in a binary whose tests run in parallel (the
unit tests), a test's time is at most its own. Exits with the command's status.
"""
import os
import re
import subprocess
import sys
import time

TSV = "target/test-times.tsv"  # every test's time, slowest first
RUNNING = re.compile(r"^\s*Running (?:unittests )?\S+ \((?:.*/)?([^/]+?)(?:-[0-9a-f]{16})?\)\s*$")
TEST_START = re.compile(r"^test (\S+) \.\.\. ?(.*)$")
RESULT = re.compile(r"(?:^|\s)(ok|FAILED)\s*$")


def human(s):
    s = int(round(s))
    if s >= 60:
        return f"{s // 60} min {s % 60} s"
    return f"{s} s"


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: test-times.py -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    start = time.monotonic()
    proc = subprocess.Popen(argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    binary = "?"
    last = start  # the previous result of this binary, or its start
    current = None  # the test whose "test NAME ... " line came last, unfinished
    times = []  # (seconds, binary::test)
    out = sys.stdout.buffer
    try:
        for raw in iter(proc.stdout.readline, b""):
            out.write(raw)
            out.flush()
            now = time.monotonic()
            line = raw.decode("utf-8", "replace").rstrip("\n")
            m = RUNNING.match(line)
            if m:
                binary, last, current = m.group(1), now, None
                continue
            m = TEST_START.match(line)
            if m:
                current = m.group(1)
                rest = m.group(2)
                if rest.startswith("ignored"):
                    current = None
                    continue
                if not RESULT.search(rest):
                    continue  # the test's own output follows on this line (a guest's echo)
            elif current is None or line.strip() not in ("ok", "FAILED"):
                continue  # only a result on a line of its own ends a test whose output came
            times.append((now - last, f"{binary}::{current}"))
            last, current = now, None
        status = proc.wait()
    except KeyboardInterrupt:
        status = proc.wait()
    total = time.monotonic() - start
    try:
        os.makedirs("target", exist_ok=True)
        with open(TSV, "w") as f:
            f.write("seconds\ttest\n")
            for s, name in sorted(times, reverse=True):
                f.write(f"{s:.1f}\t{name}\n")
    except OSError as e:
        print(f"test-times: {TSV}: {e}", file=sys.stderr)
    slowest = sorted(times, reverse=True)[:5]
    listed = ", ".join(f"{name} {human(s)}" for s, name in slowest)
    print(
        f"make test: {human(total)} in all, exit status {status}; "
        f"the {len(slowest)} slowest tests: {listed}",
        flush=True,
    )
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
