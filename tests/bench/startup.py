#!/usr/bin/python3
"""Benchmark: time from starting sepcsi-supervisor to the first answered
GetPluginInfo, over N runs. Run as root inside `unshare -m --propagation private`:

    unshare -m --propagation private /usr/bin/python3 tests/bench/startup.py [N]

Prints each run's figure and the median; asserts nothing.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402  (the e2e Driver: a real supervisor in a temp tree)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        d = conftest.Driver()  # returns once GetPluginInfo has answered
        times.append((time.monotonic() - t0) * 1000)
        d.stop()
        d.cleanup()
    print("start to first GetPluginInfo, ms:", " ".join("%.0f" % t for t in times))
    print("median %.0f ms, max %.0f ms over %d runs" % (statistics.median(times), max(times), runs))


if __name__ == "__main__":
    main()
