#!/usr/bin/env python3
"""Merges strata-bench's JSON and an incumbent's (LibTorch from bench/compare-libtorch/run, PyTorch from
bench/compare-pytorch/run; one file per workload: strata-W.json, torch-W.json), prints per metric Strata / incumbent
and the issue's targets, and writes everything as one JSON document."""
import argparse, datetime, json, os, re, subprocess

# Issue 6 targets. "ratio": on Strata / the incumbent; "strata": on Strata's own value.
CPU_TARGETS = {
    "epoch_cpu_seconds": ("<=", 0.6, "ratio"),
    "conv2d_cpu_fwd_bwd_ms": ("<=", 0.8, "ratio"),
    "tiny_add_cpu_ns": ("<=", 0.3, "ratio"),
    "vector_add_cpu_into_fraction": (">=", 0.95, "strata"),
    "vector_add_cpu_alloc_fraction": (">=", 0.8, "strata"),
    "startup_first_op_ms": ("<=", 50, "strata"),
    "compile_train_program_s": ("<=", 5, "strata"),
}
for n in (128, 256, 512, 1024, 2048, 4096):
    CPU_TARGETS[f"matmul_cpu_n{n}"] = (">=", 1.0, "ratio")
GPU_TARGETS = {
    "vector_add_gpu_into_fraction": (">=", 0.9, "strata"),
    "epoch_gpu_seconds": ("<=", 0.7, "ratio"),
}
for kind in ("f32", "tf32", "bf16"):
    for n in (64, 128, 256, 512, 1024, 2048, 4096):
        GPU_TARGETS[f"matmul_gpu_{kind}_n{n}"] = (">=", 0.95, "ratio")


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
    ap.add_argument("--against", default="LibTorch")
    ap.add_argument("--targets", choices=("cpu", "gpu"), default="cpu")
    a = ap.parse_args()

    targets = CPU_TARGETS if a.targets == "cpu" else GPU_TARGETS
    strata, torch, machine, torch_info = {}, {}, None, {}
    for w in a.workloads.split(","):
        s = load(os.path.join(a.work, f"strata-{w}.json"))
        machine = machine or s["machine"]
        strata[w] = s["workloads"][w]
        tp = os.path.join(a.work, f"torch-{w}.json")
        if os.path.exists(tp):
            t = load(tp)
            torch_info = {k: t[k] for k in ("version", "threads", "parallel_info", "environment", "device", "cuda",
                                            "cudnn") if k in t}
            torch[w] = t["workloads"].get(w, {"metrics": {}})
    if a.compile_seconds and "startup" in torch:
        torch["startup"]["metrics"]["compile_train_program_s"] = {
            "value": float(a.compile_seconds), "unit": "s", "better": "lower"}

    rows = []
    for w, sw in strata.items():
        for key, m in sw.get("metrics", {}).items():
            t = torch.get(w, {}).get("metrics", {}).get(key)
            row = {"workload": w, "key": key, "unit": m["unit"], "better": m["better"], "strata": m["value"],
                   "incumbent": t["value"] if t else None, "ratio": None, "time_ratio": None}
            if t and t["value"]:
                row["ratio"] = m["value"] / t["value"]
                # Strata's time over the incumbent's: below 1, Strata is faster, whatever the unit.
                if m["better"] == "lower":
                    row["time_ratio"] = row["ratio"]
                elif m["better"] == "higher" and m["value"] and not key.endswith("_fraction"):
                    row["time_ratio"] = t["value"] / m["value"]
            if key in targets:
                op, bound, on = targets[key]
                v = row["ratio"] if on == "ratio" else row["strata"]
                row["target"] = f"{'ratio' if on == 'ratio' else 'strata'} {op} {bound:g}"
                row["met"] = None if v is None else (v <= bound if op == "<=" else v >= bound)
            rows.append(row)
        # The incumbent's extra figures (CuPy's vector add), shown beside ours.
        for key, t in torch.get(w, {}).get("metrics", {}).items():
            if key not in sw.get("metrics", {}):
                rows.append({"workload": w, "key": key, "unit": t["unit"], "better": t["better"], "strata": None,
                             "incumbent": t["value"], "ratio": None, "time_ratio": None})

    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()[:20]
    doc = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "command": a.command,
           "machine": machine, "lscpu": lscpu, "against": a.against, "incumbent": torch_info,
           "strata_environment": {k: machine.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")},
           "rows": rows, "strata": strata, "incumbent_results": torch}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)

    def fmt(v):
        if v is None:
            return "-"
        av = abs(v)
        return f"{v:.0f}" if av >= 100 else f"{v:.1f}" if av >= 10 else f"{v:.2f}" if av >= 1 else f"{v:.3g}"

    print(f"Strata vs {a.against} {torch_info.get('version', '?')} on {torch_info.get('device', machine['cpu'])}, {machine['threads']} threads, "
          f"load average {machine.get('load_average_1min', -1):.2f}; {doc['date']}")
    print(f"| metric | unit | Strata | {a.against} | Strata / {a.against} | time ratio | target | met |")
    print(f"| --- | --- | ---: | ---: | ---: | ---: | --- | --- |")
    for w, sw in strata.items():
        if sw.get("skipped"):
            print(f"| {w} | skipped: {sw.get('skip_reason', '')} | | | | | | |")
    for r in rows:
        met = "" if "target" not in r else ("?" if r["met"] is None else "yes" if r["met"] else "**no**")
        print(f"| {r['key']} | {r['unit']} | {fmt(r['strata'])} | {fmt(r['incumbent'])} | {fmt(r['ratio'])} | "
              f"{fmt(r['time_ratio'])} | {r.get('target', '')} | {met} |")
    print(f"time ratio: Strata's time over {a.against}'s for the same work (below 1: Strata is faster).")


if __name__ == "__main__":
    main()
