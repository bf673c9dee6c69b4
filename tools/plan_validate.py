#!/usr/bin/python3
"""Checks the planner's prediction against this machine: for every mesh that runs on N processes,
the step time `vidax plan --topology local --mesh M` predicts against the step time
`mpirun -n N vidax bench dit --mesh M --guided` measures, then the ranking of the meshes.

    tools/plan_validate.py --vidax build/ci/vidax --processes 2 4 --layers 4 \
        --size 416x240 --frames 17 -o docs/results/plan_validation.json

The local topology is measured by `vidax plan` itself (kernel rates at the run's sizes, with the
threads each process gets) plus `vidax bench comm --json` under the same mpirun (the shared-memory
latency and bandwidth). Prints a Markdown table; writes every number as JSON with -o.
"""
import argparse
import json
import sys

from plan_tools import run, spearman

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vidax", default="build/ci/vidax")
    ap.add_argument("--processes", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--model", default="wan2.1-t2v-1.3b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--size", default="416x240")
    ap.add_argument("--frames", type=int, default=17)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    common = ["--model", a.model, "--layers", str(a.layers), "--size", a.size,
              "--frames", str(a.frames)]
    results = []
    for n in a.processes:
        threads = max(1, a.cores // n)
        comm = run(MPIRUN + ["-x", "OMP_NUM_THREADS=1", "-n", str(n), a.vidax, "bench", "comm",
                             "--json", "--iters", "5", "--mesh", f"ulysses={n}"],
                   {"OMP_NUM_THREADS": "1"})
        comm_file = f"/tmp/vidax_plan_validate_comm_{n}.json"
        with open(comm_file, "w") as f:
            f.write(comm)
        # The machine measured once for n processes (kept as a topology file), then every mesh
        # the planner finds executable (and fitting) on it.
        topo_file = f"/tmp/vidax_plan_validate_local_{n}.json"
        explain = json.loads(run([a.vidax, "plan", *common, "--topology", "local", "--devices",
                                  str(n), "--comm", comm_file, "--write-topology", topo_file,
                                  "--explain", "--json"], {"OMP_NUM_THREADS": str(threads)}))
        rows = []
        for c in explain["candidates"]:
            if c["status"] == "rejected":
                continue
            pred = json.loads(run([a.vidax, "plan", *common, "--topology", topo_file,
                                   "--mesh", c["mesh"], "--weights", c["weights"], "--json"],
                                  {"OMP_NUM_THREADS": str(threads)}))["predicted"]
            bench = [a.vidax, "bench", "dit", *common, "--guided", "--json", "--no-peak",
                     "--iters", str(a.iters), "--mesh", c["mesh"], "--weights-mode", c["weights"]]
            measured = json.loads(run(MPIRUN + ["-x", f"OMP_NUM_THREADS={threads}", "-n", str(n)]
                                      + bench, {"OMP_NUM_THREADS": str(threads)}))
            row = {"processes": n, "threads": threads, "mesh": c["mesh"], "weights": c["weights"],
                   "predicted_step_s": pred["step_s"], "predicted": pred,
                   "measured_step_s": measured["seconds_per_step"],
                   "measured_comm": measured.get("comm", {})}
            row["error"] = row["predicted_step_s"] / row["measured_step_s"] - 1
            rows.append(row)
            print(f"n={n} {c['mesh']:32s} {c['weights']:8s} predicted {row['predicted_step_s']:.3f}"
                  f" s measured {row['measured_step_s']:.3f} s ({100 * row['error']:+.1f}%)",
                  file=sys.stderr)
        p = [r["predicted_step_s"] for r in rows]
        m = [r["measured_step_s"] for r in rows]
        best_p = min(range(len(rows)), key=lambda i: p[i])
        best_m = min(range(len(rows)), key=lambda i: m[i])
        with open(topo_file) as f:
            topology = json.load(f)
        results.append({"processes": n, "topology": topology, "rows": rows, "spearman": spearman(p, m),
                        "predicted_winner": rows[best_p]["mesh"] + " " + rows[best_p]["weights"],
                        "measured_winner": rows[best_m]["mesh"] + " " + rows[best_m]["weights"],
                        "planner_choice": explain["mesh"]["spec"] + " " + explain["weights"]})
    print("| processes | mesh | weights | predicted s/step | measured s/step | error |")
    print("|---|---|---|---|---|---|")
    for res in results:
        for r in sorted(res["rows"], key=lambda r: r["measured_step_s"]):
            print(f"| {r['processes']} | {r['mesh']} | {r['weights']} | "
                  f"{r['predicted_step_s']:.3f} | {r['measured_step_s']:.3f} | "
                  f"{100 * r['error']:+.1f}% |")
    for res in results:
        print(f"\nn={res['processes']}: Spearman {res['spearman']:.2f}; predicted winner "
              f"{res['predicted_winner']}, measured winner {res['measured_winner']}")
    if a.output:
        with open(a.output, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
