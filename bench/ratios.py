#!/usr/bin/env python3
"""Merges strata-bench's JSON and an incumbent's (LibTorch from bench/compare-libtorch/run, PyTorch from
bench/compare-pytorch/run; one file per workload: strata-W.json, torch-W.json), prints per metric Strata / incumbent
and the issue's targets, and writes everything as one JSON document.

With --baseline TOOL,TOOL (files TOOL-W.json in torch_bench's shape; the raw BLAS libraries of blas_bench.cpp), the
best of those tools per metric is a second baseline, printed as its own ratio beside the incumbent's."""
import argparse, datetime, json, os, re, subprocess

# Targets. "ratio": on Strata / the incumbent; "baseline": on Strata / the best of the --baseline tools;
# "strata": on Strata's own value. "cpu": against Debian's LibTorch 1.13; "cpu-pytorch2": against today's PyTorch
# (the LibTorch of its wheel), which is faster, so the ratios asked for are looser where it caught up.
CPU_TARGETS = {
    "epoch_cpu_seconds": ("<=", 0.45, "ratio"),
    "conv2d_cpu_fwd_bwd_ms": ("<=", 0.6, "ratio"),
    "tiny_add_cpu_ns": ("<=", 0.3, "ratio"),
    "vector_add_cpu_into_fraction": (">=", 0.95, "strata"),
    "vector_add_cpu_alloc_fraction": (">=", 0.8, "strata"),
    "startup_first_op_ms": ("<=", 50, "strata"),
    "compile_train_program_s": ("<=", 5, "strata"),
}
# sgemm: >= 1.0x the best of OpenBLAS/oneDNN, the raw libraries (bench/compare-libtorch/blas_bench.cpp).
for n in (128, 256, 512, 1024, 2048, 4096):
    CPU_TARGETS[f"matmul_cpu_n{n}"] = (">=", 1.0, "baseline")
CPU_PYTORCH2_TARGETS = {
    **CPU_TARGETS,
    "epoch_cpu_seconds": ("<=", 0.6, "ratio"),
    "conv2d_cpu_fwd_bwd_ms": ("<=", 0.8, "ratio"),
    "startup_first_op_ms": ("<=", 0.05, "ratio"),
    "compile_train_program_s": ("<=", 0.2, "ratio"),
}
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


def about(tool_doc):
    """What a comparison tool says about itself (version, threads, environment...)."""
    return {k: tool_doc[k] for k in ("version", "threads", "parallel_info", "environment", "device", "cuda", "cudnn")
            if k in tool_doc}


def ratios(key, m, other):
    """(Strata / other, Strata's time over other's for the same work): below 1 in the second, Strata is faster,
    whatever the unit. m is Strata's metric, other the value it is compared with."""
    if not other:
        return None, None
    ratio, time_ratio = m["value"] / other, None
    if m["better"] == "lower":
        time_ratio = ratio
    elif m["better"] == "higher" and m["value"] and not key.endswith("_fraction"):
        time_ratio = other / m["value"]
    return ratio, time_ratio


def load_round(a, suffix):
    """One round's results: strata-W<suffix>.json, torch-W<suffix>.json and the baselines' TOOL-W<suffix>.json."""
    strata, torch, machine, torch_info = {}, {}, None, {}
    for w in a.workloads.split(","):
        s = load(os.path.join(a.work, f"strata-{w}{suffix}.json"))
        machine = machine or s["machine"]
        strata[w] = s["workloads"][w]
        tp = os.path.join(a.work, f"torch-{w}{suffix}.json")
        if os.path.exists(tp):
            t = load(tp)
            torch_info = about(t)
            torch[w] = t["workloads"].get(w, {"metrics": {}})
    if a.compile_seconds and "startup" in torch:
        torch["startup"]["metrics"]["compile_train_program_s"] = {
            "value": float(a.compile_seconds), "unit": "s", "better": "lower"}
    # The second baseline: per metric, the best value among the --baseline tools, and which tool gave it.
    tools = [t for t in a.baseline.split(",") if t]
    baseline, baseline_info, baseline_results = {}, {}, {}
    for tool in tools:
        for w in strata:
            bp = os.path.join(a.work, f"{tool}-{w}{suffix}.json")
            if not os.path.exists(bp):
                continue
            b = load(bp)
            baseline_info[tool] = about(b)
            baseline_results.setdefault(tool, {})[w] = b["workloads"].get(w, {"metrics": {}})
            for key, m in baseline_results[tool][w]["metrics"].items():
                best = baseline.get(key)
                higher = m["better"] == "higher"
                if best is None or (m["value"] > best["value"] if higher else m["value"] < best["value"]):
                    baseline[key] = {"value": m["value"], "tool": tool}
    tools = [t for t in tools if t in baseline_info]  # those that ran (the workloads may not include theirs)
    return {"strata": strata, "torch": torch, "machine": machine, "torch_info": torch_info, "baseline": baseline,
            "baseline_info": baseline_info, "baseline_results": baseline_results, "tools": tools}


def rows_of(rd):
    """The table's rows for one round: Strata's value, the incumbent's and the baseline's, and their ratios."""
    rows = []
    for w, sw in rd["strata"].items():
        for key, m in sw.get("metrics", {}).items():
            t = rd["torch"].get(w, {}).get("metrics", {}).get(key)
            row = {"workload": w, "key": key, "unit": m["unit"], "better": m["better"], "strata": m["value"],
                   "incumbent": t["value"] if t else None}
            row["ratio"], row["time_ratio"] = ratios(key, m, row["incumbent"])
            if rd["tools"]:
                b = rd["baseline"].get(key)
                row["baseline"], row["baseline_tool"] = (b["value"], b["tool"]) if b else (None, None)
                row["baseline_ratio"], row["baseline_time_ratio"] = ratios(key, m, row["baseline"])
            rows.append(row)
        # The incumbent's extra figures (CuPy's vector add), shown beside ours.
        for key, t in rd["torch"].get(w, {}).get("metrics", {}).items():
            if key not in sw.get("metrics", {}):
                rows.append({"workload": w, "key": key, "unit": t["unit"], "better": t["better"], "strata": None,
                             "incumbent": t["value"], "ratio": None, "time_ratio": None})
    return rows


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def merged(rounds_rows):
    """With several rounds, each figure and each ratio is the median over the rounds (the ratios are taken round by
    round, Strata's beside the others' of the same round, then their median); every round's time ratio is kept."""
    rows = []
    for same in zip(*rounds_rows):
        row = dict(same[-1])
        for field in ("strata", "incumbent", "ratio", "time_ratio", "baseline", "baseline_ratio",
                      "baseline_time_ratio"):
            if field in row:
                row[field] = median(r.get(field) for r in same)
        if len(same) > 1:
            row["rounds_time_ratio"] = [r.get("time_ratio") for r in same]
            if "baseline_time_ratio" in row:
                row["rounds_baseline_time_ratio"] = [r.get("baseline_time_ratio") for r in same]
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--compile-seconds", default="")
    ap.add_argument("--command", default="bench/compare-libtorch/run")
    ap.add_argument("--json", required=True)
    ap.add_argument("--against", default="LibTorch")
    ap.add_argument("--targets", choices=("cpu", "cpu-pytorch2", "gpu"), default="cpu")
    ap.add_argument("--baseline", default="", help="tools whose best value per metric is a second baseline")
    ap.add_argument("--baseline-name", default="best BLAS")
    ap.add_argument("--rounds", type=int, default=1, help="files of round n > 1 are named W.n.json")
    a = ap.parse_args()

    targets = {"cpu": CPU_TARGETS, "cpu-pytorch2": CPU_PYTORCH2_TARGETS, "gpu": GPU_TARGETS}[a.targets]
    rounds = [load_round(a, "" if r == 1 else f".{r}") for r in range(1, a.rounds + 1)]
    last = rounds[-1]
    strata, torch, machine, torch_info = last["strata"], last["torch"], last["machine"], last["torch_info"]
    tools, baseline_info, baseline_results = last["tools"], last["baseline_info"], last["baseline_results"]
    rows = merged([rows_of(rd) for rd in rounds])
    for row in rows:
        if row["key"] in targets and row["strata"] is not None:
            op, bound, on = targets[row["key"]]
            v = {"ratio": row["ratio"], "baseline": row.get("baseline_ratio"), "strata": row["strata"]}[on]
            label = {"ratio": "ratio", "baseline": f"{a.baseline_name} ratio", "strata": "strata"}[on]
            row["target"] = f"{label} {op} {bound:g}"
            row["met"] = None if v is None else (v <= bound if op == "<=" else v >= bound)

    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()[:20]
    doc = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "command": a.command,
           "machine": machine, "lscpu": lscpu, "against": a.against, "incumbent": torch_info,
           "strata_environment": {k: machine.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")},
           "rounds": a.rounds, "rows": rows, "strata": strata, "incumbent_results": torch}
    if tools:
        doc["baseline"] = {"name": a.baseline_name, "tools": baseline_info}
        doc["baseline_results"] = baseline_results
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)

    def fmt(v):
        if v is None:
            return "-"
        av = abs(v)
        return f"{v:.0f}" if av >= 100 else f"{v:.1f}" if av >= 10 else f"{v:.2f}" if av >= 1 else f"{v:.3g}"

    print(f"Strata vs {a.against} {torch_info.get('version', '?')} on {torch_info.get('device', machine['cpu'])}, {machine['threads']} threads, "
          f"load average {machine.get('load_average_1min', -1):.2f}; {doc['date']}")
    # The baseline's two columns only when there is one, so that a table without it reads as before.
    extra = f" {a.baseline_name} | Strata / {a.baseline_name} |" if tools else ""
    each = " rounds' time ratios |" if a.rounds > 1 else ""
    print(f"| metric | unit | Strata | {a.against} | Strata / {a.against} | time ratio |{each}{extra} target | met |")
    print(f"| --- | --- | ---: | ---: | ---: | ---: |{' --- |' if each else ''}{' ---: | ---: |' if tools else ''} --- | --- |")
    for w, sw in strata.items():
        if sw.get("skipped"):
            print(f"| {w} | skipped: {sw.get('skip_reason', '')} | | | | |{' |' if each else ''}{' | |' if tools else ''} | |")
    for r in rows:
        met = "" if "target" not in r else ("?" if r["met"] is None else "yes" if r["met"] else "**no**")
        extra = ""
        if tools:
            best = f"{fmt(r['baseline'])} ({r['baseline_tool']})" if r.get("baseline") is not None else "-"
            extra = f" {best} | {fmt(r.get('baseline_ratio'))} |"
        rounds = ""
        if each:
            rounds = " " + (", ".join(fmt(x) for x in r.get("rounds_time_ratio") or [] if x is not None) or "-") + " |"
        print(f"| {r['key']} | {r['unit']} | {fmt(r['strata'])} | {fmt(r['incumbent'])} | {fmt(r['ratio'])} | "
              f"{fmt(r['time_ratio'])} |{rounds}{extra} {r.get('target', '')} | {met} |")
    print(f"time ratio: Strata's time over {a.against}'s for the same work (below 1: Strata is faster).")
    if a.rounds > 1:
        print(f"{a.rounds} rounds: each figure and ratio is the median of the rounds' (ratios taken round by round); "
              "the JSON has every round's.")
    if tools:
        print(f"{a.baseline_name}: the best of {', '.join(tools)} for each metric, the tool in brackets.")


if __name__ == "__main__":
    main()
