#!/usr/bin/env python3
"""Merges strata-bench's and torch_bench's JSON (one file per workload, from ./run), prints per metric
Strata / LibTorch and the issue's targets, and writes everything as one JSON document."""
import argparse, datetime, json, os, re, subprocess

# Issue 6 targets. "ratio": on Strata / LibTorch; "strata": on Strata's own value.
TARGETS = {
    "epoch_cpu_seconds": ("<=", 0.6, "ratio"),
    "conv2d_cpu_fwd_bwd_ms": ("<=", 0.8, "ratio"),
    "tiny_add_cpu_ns": ("<=", 0.3, "ratio"),
    "vector_add_cpu_into_fraction": (">=", 0.95, "strata"),
    "vector_add_cpu_alloc_fraction": (">=", 0.8, "strata"),
    "startup_first_op_ms": ("<=", 50, "strata"),
    "compile_train_program_s": ("<=", 5, "strata"),
}
for n in (128, 256, 512, 1024, 2048, 4096):
    TARGETS[f"matmul_cpu_n{n}"] = (">=", 1.0, "ratio")


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--compile-seconds", default="")
    ap.add_argument("--command", default="bench/compare-libtorch/run")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()

    strata, torch, machine, torch_info = {}, {}, None, {}
    for w in a.workloads.split(","):
        s = load(os.path.join(a.work, f"strata-{w}.json"))
        machine = machine or s["machine"]
        strata[w] = s["workloads"][w]
        tp = os.path.join(a.work, f"torch-{w}.json")
        if os.path.exists(tp):
            t = load(tp)
            torch_info = {k: t[k] for k in ("version", "threads", "parallel_info") if k in t}
            torch[w] = t["workloads"].get(w, {"metrics": {}})
    if a.compile_seconds and "startup" in torch:
        torch["startup"]["metrics"]["compile_train_program_s"] = {
            "value": float(a.compile_seconds), "unit": "s", "better": "lower"}

    rows = []
    for w, sw in strata.items():
        for key, m in sw.get("metrics", {}).items():
            t = torch.get(w, {}).get("metrics", {}).get(key)
            row = {"workload": w, "key": key, "unit": m["unit"], "better": m["better"], "strata": m["value"],
                   "libtorch": t["value"] if t else None, "ratio": None, "time_ratio": None}
            if t and t["value"]:
                row["ratio"] = m["value"] / t["value"]
                # Strata's time over LibTorch's: below 1, Strata is faster, whatever the unit.
                if m["better"] == "lower":
                    row["time_ratio"] = row["ratio"]
                elif m["better"] == "higher" and m["value"] and not key.endswith("_fraction"):
                    row["time_ratio"] = t["value"] / m["value"]
            if key in TARGETS:
                op, bound, on = TARGETS[key]
                v = row["ratio"] if on == "ratio" else row["strata"]
                row["target"] = f"{'ratio' if on == 'ratio' else 'strata'} {op} {bound:g}"
                row["met"] = None if v is None else (v <= bound if op == "<=" else v >= bound)
            rows.append(row)

    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()[:20]
    doc = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "command": a.command,
           "machine": machine, "lscpu": lscpu, "libtorch": torch_info,
           "libtorch_environment": "OPENBLAS_NUM_THREADS=1, OPENBLAS_CORETYPE unset",
           "strata_environment": {k: machine.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")},
           "rows": rows, "strata": strata, "libtorch_results": torch}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)

    def fmt(v):
        if v is None:
            return "-"
        av = abs(v)
        return f"{v:.0f}" if av >= 100 else f"{v:.1f}" if av >= 10 else f"{v:.2f}" if av >= 1 else f"{v:.3g}"

    print(f"Strata vs LibTorch {torch_info.get('version', '?')} on {machine['cpu']}, {machine['threads']} threads, "
          f"load average {machine.get('load_average_1min', -1):.2f}; {doc['date']}")
    print(f"| metric | unit | Strata | LibTorch | Strata / LibTorch | time ratio | target | met |")
    print(f"| --- | --- | ---: | ---: | ---: | ---: | --- | --- |")
    for w, sw in strata.items():
        if sw.get("skipped"):
            print(f"| {w} | skipped: {sw.get('skip_reason', '')} | | | | | | |")
    for r in rows:
        met = "" if "target" not in r else ("?" if r["met"] is None else "yes" if r["met"] else "**no**")
        print(f"| {r['key']} | {r['unit']} | {fmt(r['strata'])} | {fmt(r['libtorch'])} | {fmt(r['ratio'])} | "
              f"{fmt(r['time_ratio'])} | {r.get('target', '')} | {met} |")
    print("time ratio: Strata's time over LibTorch's for the same work (below 1: Strata is faster).")


if __name__ == "__main__":
    main()
