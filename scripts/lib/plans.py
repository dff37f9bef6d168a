#!/usr/bin/env python3
"""One plan per statement from a PostgreSQL server log that auto_explain wrote into.

Usage: plans.py SERVER_LOG. Prints each distinct statement (its query text, the whitespace
collapsed) once: how many times it ran in the log's window, its median and largest
duration, then the plan of its median run. Statements come by their total time, largest
first. Used by `scripts/bench scale` (docs/benchmarks.md, "Cost at scale").
"""

import re
import statistics
import sys

ENTRY = re.compile(r"LOG:  duration: ([0-9.]+) ms  plan:$")
PLAN_NODE = re.compile(r"\((cost|actual)[ =]")


def entries(lines):
    """(duration, query, plan lines) of each auto_explain entry."""
    current = None
    for line in lines:
        line = line.rstrip("\n")
        match = ENTRY.search(line)
        if match:
            if current:
                yield current
            current = (float(match.group(1)), [])
        elif current and line.startswith("\t"):
            current[1].append(line[1:])
        elif current:
            yield current
            current = None
    if current:
        yield current


def split(body):
    """The query text (whitespace collapsed) and the plan's lines."""
    for index, line in enumerate(body):
        if PLAN_NODE.search(line):
            text = " ".join(body[:index]).removeprefix("Query Text:")
            return " ".join(text.split()), body[index:]
    return " ".join(" ".join(body).split()), []


def main(path):
    runs = {}
    with open(path, encoding="utf-8", errors="replace") as log:
        for duration, body in entries(log):
            query, plan = split(body)
            runs.setdefault(query, []).append((duration, plan))
    by_total = sorted(runs.items(), key=lambda item: -sum(d for d, _ in item[1]))
    print(f"{len(by_total)} statements, {sum(len(r) for r in runs.values())} runs logged")
    for query, seen in by_total:
        durations = sorted(d for d, _ in seen)
        median = statistics.median_low(durations)
        plan = next(plan for duration, plan in seen if duration == median)
        print()
        print("=" * 100)
        print(f"runs {len(seen)}, median {median:.3f} ms, largest {durations[-1]:.3f} ms")
        print(query)
        print("-" * 100)
        print("\n".join(plan))


if __name__ == "__main__":
    main(sys.argv[1])
