#!/usr/bin/env python3
"""The table of `scripts/bench peers`: Quire's figures beside Celery's, graphile-worker's and
the FastAPI upload peer's from the same invocation, Quire's ratio to each, and issue 19's
targets met or missed; the combined JSON goes to --out (docs/benchmarks.md is written from it).

Ratios, not absolute figures, are what this compares: on this shared machine the absolute
figures move by 2x from one day to the next, while systems measured minutes apart move
together. Standard library only (runs on the system python3).

Inputs in --dir, each written by scripts/bench: quire-integrity.json, quire-500.json,
quire-noop.json, quire-default-slots.json (the integrity drain at the worker's own default
slots), quire-s3.json (optional; each quire-bench's first stdout line),
celery.json, graphile.json (the harness's last stdout line), fastapi-wrk.txt and quire-wrk.txt
(wrk's output with bench/peers/upload/upload.lua against the FastAPI peer and quire-api)."""
import argparse
import json
import os
import re
import sys


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read().strip()
    return json.loads(text) if text else None


def wrk_uploads(folder, system):
    """uploads/s, requests and errors from upload.lua's closing line, or None."""
    path = os.path.join(folder, f"{system}-wrk.txt")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        found = re.search(r"UPLOADS (\d+) requests, ([\d.]+)/s, errors (\d+)", f.read())
    if not found:
        return None
    return {"system": system, "requests": int(found[1]),
            "uploads_per_second": float(found[2]), "errors": int(found[3])}


def figures(runs):
    """Each system's figures under one set of names (None where a system has none)."""
    quire, celery, graphile, fastapi = (runs.get(k) for k in ("quire", "celery", "graphile", "fastapi"))
    out = {}
    if quire:
        finish = quire["steady"]["commit_to_finish_ms"]
        out["quire"] = {"enqueue": quire["enqueue_jobs_per_second"], "drain": quire["drain_jobs_per_second"],
                        "p50": finish["p50"], "p99": finish["p99"],
                        "uploads": quire["http_uploads_per_second"] or None}
    for name, peer in (("celery", celery), ("graphile", graphile)):
        if peer:
            out[name] = {"enqueue": peer["enqueue_jobs_per_s"], "drain": peer["drain_jobs_per_s"],
                         "p50": peer["p50_ms"], "p99": peer["p99_ms"], "uploads": None}
    if fastapi:
        out["fastapi"] = {"enqueue": None, "drain": None, "p50": None, "p99": None,
                          "uploads": wrk_figure(fastapi), "uploads_wrk": wrk_figure(fastapi)}
    if quire and runs.get("quire_wrk"):
        out["quire"]["uploads_wrk"] = wrk_figure(runs["quire_wrk"])
    return out


def wrk_figure(run):
    """A wrk run's uploads/s; none when any request failed (not every upload was stored)."""
    return None if run["errors"] else run["uploads_per_second"]


def ratio(a, b):
    return round(a / b, 2) if a is not None and b else None


def targets(runs, fig):
    """Issue 19's targets: (what, Quire's figure as a ratio, the bound, 'max' or 'min')."""
    q, g, c, f = (fig.get(k, {}) for k in ("quire", "graphile", "celery", "fastapi"))
    rows = [
        ("commit → finish p50 at 50 jobs/s ≤ 0.8× graphile-worker's", ratio(q.get("p50"), g.get("p50")), 0.8, "max"),
        ("commit → finish p99 at 50 jobs/s ≤ graphile-worker's", ratio(q.get("p99"), g.get("p99")), 1.0, "max"),
    ]
    fast = runs.get("quire_500")
    rows.append(("commit → finish p99 at 500 jobs/s ≤ 2× the 50 jobs/s p99",
                 ratio(fast["steady"]["commit_to_finish_ms"]["p99"], q.get("p99")) if fast else None, 2.0, "max"))
    # The drain at the bench's slots (16 by default) and, when measured, at the worker's
    # own default slots (`worker.concurrency`), each against the same peer runs.
    slots = runs["quire"].get("slots")
    rows += [
        (f"drain at {slots} slots ≥ 2.5× graphile-worker's", ratio(q.get("drain"), g.get("drain")), 2.5, "min"),
        (f"drain at {slots} slots ≥ 4× Celery's", ratio(q.get("drain"), c.get("drain")), 4.0, "min"),
    ]
    default = runs.get("quire_default_slots")
    if default:
        drain = default["drain_jobs_per_second"]
        rows += [
            (f"  at the worker's default {default['slots']} slots ≥ 2.5× graphile-worker's",
             ratio(drain, g.get("drain")), 2.5, "min"),
            (f"  at the worker's default {default['slots']} slots ≥ 4× Celery's",
             ratio(drain, c.get("drain")), 4.0, "min"),
        ]
    noop = runs.get("quire_noop")
    rows.append(("no-op drain ≥ 2× the integrity drain",
                 ratio(noop["drain_jobs_per_second"], q.get("drain")) if noop else None, 2.0, "min"))
    rows.append(("uploads (local storage) ≥ 5× the FastAPI peer's", ratio(q.get("uploads"), f.get("uploads")), 5.0, "min"))
    rows.append(("  the same, both under wrk", ratio(q.get("uploads_wrk"), f.get("uploads_wrk")), 5.0, "min"))
    s3 = runs.get("quire_s3")
    rows.append(("uploads on S3 ≥ 3× the FastAPI peer's",
                 ratio(s3["http_uploads_per_second"], f.get("uploads")) if s3 else None, 3.0, "min"))
    out = []
    for what, value, bound, kind in rows:
        met = None if value is None else (value <= bound if kind == "max" else value >= bound)
        out.append({"target": what, "ratio": value, "bound": bound, "met": met})
    return out


def number(value, digits=0):
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def print_table(runs, fig, tgts):
    systems = [s for s in ("quire", "celery", "graphile", "fastapi") if s in fig]
    names = {"quire": "quire", "celery": "celery", "graphile": "graphile", "fastapi": "fastapi"}
    peers = [s for s in systems if s != "quire"]
    rows = [("enqueue (jobs/s)", "enqueue", 0), ("drain (jobs/s)", "drain", 0),
            ("commit → finish p50, 50/s (ms)", "p50", 2), ("commit → finish p99, 50/s (ms)", "p99", 2),
            ("uploads of 64 KiB, 16 clients (/s)", "uploads", 0),
            ("  the same, both under wrk (/s)", "uploads_wrk", 0)]
    head = f"  {'figure':<36}" + "".join(f"{names[s]:>10}" for s in systems) + \
        "".join(f"{'q/' + names[s]:>12}" for s in peers)
    print(head)
    for label, key, digits in rows:
        line = f"  {label:<36}" + "".join(f"{number(fig[s].get(key), digits):>10}" for s in systems)
        line += "".join(f"{number(ratio(fig['quire'].get(key), fig[s].get(key)), 2):>12}" for s in peers)
        print(line)
    extra = []
    if runs.get("quire_noop"):
        extra.append(f"quire no-op drain {number(runs['quire_noop']['drain_jobs_per_second'])} jobs/s")
    if runs.get("quire_default_slots"):
        default = runs["quire_default_slots"]
        extra.append(f"quire integrity drain at the worker's default {default['slots']} slots "
                     f"{number(default['drain_jobs_per_second'])} jobs/s")
    if runs.get("quire_500"):
        fast = runs["quire_500"]["steady"]["commit_to_finish_ms"]
        extra.append(f"quire at 500 jobs/s p50/p99 {fast['p50']:.2f} / {fast['p99']:.2f} ms")
    if runs.get("quire_s3"):
        extra.append(f"quire uploads on S3 {number(runs['quire_s3']['http_uploads_per_second'])}/s")
    for line in extra:
        print(f"  {line}")
    print("  q/peer is Quire's figure divided by the peer's (latency: below 1 is better).")
    if runs.get("run", {}).get("debug_builds"):
        print("  warning: QUIRE_BENCH_DEBUG=1 ran debug builds of Quire: these figures mean nothing")
    for name in ("celery", "graphile"):
        if runs.get(name, {}).get("contended"):
            print(f"  warning: {name}'s run was contended (other processes took > 0.15 core): rerun it")
    for name in ("fastapi", "quire_wrk"):
        if runs.get(name) and runs[name]["errors"]:
            print(f"  warning: {name}'s wrk run had {runs[name]['errors']} failed uploads: no figure")
    print()
    print("  targets (issue 19)")
    for t in tgts:
        verdict = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
        print(f"  {t['target']:<60} {number(t['ratio'], 2):>8}  {verdict}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta", default="{}", help="JSON object stored as the output's 'run'")
    a = ap.parse_args()
    runs = {"quire": load(a.dir, "quire-integrity.json"), "quire_500": load(a.dir, "quire-500.json"),
            "quire_noop": load(a.dir, "quire-noop.json"), "quire_s3": load(a.dir, "quire-s3.json"),
            "quire_default_slots": load(a.dir, "quire-default-slots.json"),
            "celery": load(a.dir, "celery.json"), "graphile": load(a.dir, "graphile.json"),
            "fastapi": wrk_uploads(a.dir, "fastapi"), "quire_wrk": wrk_uploads(a.dir, "quire")}
    runs = {k: v for k, v in runs.items() if v is not None}
    if "quire" not in runs:
        sys.exit("compare.py: no quire-integrity.json: nothing to compare")
    fig = figures(runs)
    tgts = targets(runs, fig)
    ratios = {peer: {key: ratio(fig["quire"].get(key), value) for key, value in fig[peer].items()}
              for peer in fig if peer != "quire"}
    print_table(dict(runs, run=json.loads(a.meta)), fig, tgts)
    with open(a.out, "w") as f:
        json.dump({"run": json.loads(a.meta), "figures": fig, "ratios": ratios, "targets": tgts,
                   "raw": runs}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
