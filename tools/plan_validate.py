#!/usr/bin/python3
"""Checks the planner's prediction against this machine: for every mesh that runs on N processes,
the step time `vidax plan --topology local --mesh M` predicts against the step time
`mpirun -n N vidax bench dit --mesh M --guided` measures, then the ranking of the meshes.

    tools/plan_validate.py --vidax build/ci/vidax --processes 2 4 --layers 4 \
        --size 416x240 --frames 17 -o docs/results/plan_validation.json

The local topology is measured by `vidax plan` itself (kernel rates at the run's sizes, with the
threads each process gets) plus `vidax bench comm --json` under the same mpirun (the shared-memory
latency and bandwidth). With --rounds R the calibration and the measurement of every mesh are
repeated R times, the meshes in a new random order each round (interleaved, so a slow spell of a
shared machine does not fall on one mesh), and the table gives the medians over rounds with the
spread of the measured times. Prints a Markdown table; writes every number as JSON with -o.
"""
import argparse
import json
import random
import statistics
import sys

from plan_tools import run, spearman

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def calibrate(a, n, threads, common, tag):
    """Measures the machine for n processes (comm under mpirun, then `vidax plan --topology
    local`): the topology file's path and the planner's --explain answer."""
    comm = run(MPIRUN + ["-x", "OMP_NUM_THREADS=1", "-n", str(n), a.vidax, "bench", "comm",
                         "--json", "--iters", "5", "--mesh", f"ulysses={n}"],
               {"OMP_NUM_THREADS": "1"})
    comm_file = f"/tmp/vidax_plan_validate_comm_{n}{tag}.json"
    with open(comm_file, "w") as f:
        f.write(comm)
    topo_file = f"/tmp/vidax_plan_validate_local_{n}{tag}.json"
    explain = json.loads(run([a.vidax, "plan", *common, "--topology", "local", "--devices",
                              str(n), "--comm", comm_file, "--write-topology", topo_file,
                              "--explain", "--json"], {"OMP_NUM_THREADS": str(threads)}))
    return topo_file, explain


def predict(a, threads, common, topo_file, mesh, weights):
    return json.loads(run([a.vidax, "plan", *common, "--topology", topo_file, "--mesh", mesh,
                           "--weights", weights, "--json"],
                          {"OMP_NUM_THREADS": str(threads)}))["predicted"]


def flat_copy(topo_file):
    """The topology without its per-rows shares: every mesh priced with `efficiency` (the finest
    split's GEMM rate, the same fitted correction factors)."""
    with open(topo_file) as f:
        t = json.load(f)
    if "efficiency_by_rows" not in t["device"]:
        return None
    del t["device"]["efficiency_by_rows"]
    flat = topo_file.replace(".json", "_flat.json")
    with open(flat, "w") as f:
        json.dump(t, f)
    return flat


def predict_and_measure(a, n, threads, common, topo_file, mesh, weights):
    pred = predict(a, threads, common, topo_file, mesh, weights)
    bench = [a.vidax, "bench", "dit", *common, "--guided", "--json", "--no-peak",
             "--iters", str(a.iters), "--mesh", mesh, "--weights-mode", weights]
    measured = json.loads(run(MPIRUN + ["-x", f"OMP_NUM_THREADS={threads}", "-n", str(n)] + bench,
                              {"OMP_NUM_THREADS": str(threads)}))
    return pred, measured


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
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat calibration and measurement this often, the meshes in a new "
                         "random order each round; the tables use the medians over rounds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("--rounds must be at least 1")
    common = ["--model", a.model, "--layers", str(a.layers), "--size", a.size,
              "--frames", str(a.frames)]
    shuffle = random.Random(a.seed)
    # Per n: the executable meshes (from the first calibration) and, per mesh, one entry per round.
    meshes, samples, topologies, choices = {}, {}, {}, {}
    for r in range(a.rounds):
        for n in a.processes:
            threads = max(1, a.cores // n)
            tag = f"_round{r}" if a.rounds > 1 else ""
            topo_file, explain = calibrate(a, n, threads, common, tag)
            if n not in meshes:
                meshes[n] = [(c["mesh"], c["weights"]) for c in explain["candidates"]
                             if c["status"] != "rejected"]
                samples[n] = {m: [] for m in meshes[n]}
            with open(topo_file) as f:
                topologies.setdefault(n, []).append(json.load(f))
            if tag:  # the latest round's topology also under the untagged name plan_emulate.py reads
                with open(f"/tmp/vidax_plan_validate_local_{n}.json", "w") as f:
                    json.dump(topologies[n][-1], f, indent=2)
            choices.setdefault(n, []).append(explain["mesh"]["spec"] + " " + explain["weights"])
            flat = flat_copy(topo_file)
            order = list(meshes[n])
            shuffle.shuffle(order)
            for mesh, weights in order:
                pred, measured = predict_and_measure(a, n, threads, common, topo_file, mesh,
                                                     weights)
                samples[n][(mesh, weights)].append({
                    "round": r, "predicted_step_s": pred["step_s"], "predicted": pred,
                    "predicted_flat_step_s": (predict(a, threads, common, flat, mesh, weights)
                                              ["step_s"] if flat else pred["step_s"]),
                    "measured_step_s": measured["seconds_per_step"],
                    "measured_comm": measured.get("comm", {})})
                s = samples[n][(mesh, weights)][-1]
                print(f"round {r} n={n} {mesh:32s} {weights:8s} predicted "
                      f"{s['predicted_step_s']:.3f} s measured {s['measured_step_s']:.3f} s "
                      f"({100 * (s['predicted_step_s'] / s['measured_step_s'] - 1):+.1f}%)",
                      file=sys.stderr)
    results = []
    for n in a.processes:
        rows = []
        for mesh, weights in meshes[n]:
            runs = samples[n][(mesh, weights)]
            pred = statistics.median(x["predicted_step_s"] for x in runs)
            meas = statistics.median(x["measured_step_s"] for x in runs)
            flat = statistics.median(x["predicted_flat_step_s"] for x in runs)
            rows.append({"processes": n, "threads": max(1, a.cores // n), "mesh": mesh,
                         "weights": weights, "predicted_step_s": pred, "measured_step_s": meas,
                         "error": pred / meas - 1, "predicted_flat_step_s": flat,
                         "error_flat": flat / meas - 1,
                         "measured_spread": (max(x["measured_step_s"] for x in runs) /
                                             min(x["measured_step_s"] for x in runs) - 1),
                         "rounds": runs})
        p = [r["predicted_step_s"] for r in rows]
        m = [r["measured_step_s"] for r in rows]
        best_p = min(range(len(rows)), key=lambda i: p[i])
        best_m = min(range(len(rows)), key=lambda i: m[i])
        results.append({"processes": n, "topologies": topologies[n], "rows": rows,
                        "spearman": spearman(p, m),
                        "predicted_winner": rows[best_p]["mesh"] + " " + rows[best_p]["weights"],
                        "measured_winner": rows[best_m]["mesh"] + " " + rows[best_m]["weights"],
                        "planner_choices": choices[n]})
    print("| processes | mesh | weights | predicted s/step | measured s/step | error |"
          " measured spread | error, one share for all rows |")
    print("|---|---|---|---|---|---|---|---|")
    for res in results:
        for r in sorted(res["rows"], key=lambda r: r["measured_step_s"]):
            print(f"| {r['processes']} | {r['mesh']} | {r['weights']} | "
                  f"{r['predicted_step_s']:.3f} | {r['measured_step_s']:.3f} | "
                  f"{100 * r['error']:+.1f}% | {100 * r['measured_spread']:.1f}% | "
                  f"{100 * r['error_flat']:+.1f}% |")
    for res in results:
        within = sum(1 for r in res["rows"] if abs(r["error"]) <= 0.15)
        within_flat = sum(1 for r in res["rows"] if abs(r["error_flat"]) <= 0.15)
        flat_p = [r["predicted_flat_step_s"] for r in res["rows"]]
        flat_m = [r["measured_step_s"] for r in res["rows"]]
        print(f"\nn={res['processes']}: {within} of {len(res['rows'])} within 15% "
              f"({within_flat} with one share for all rows); Spearman {res['spearman']:.2f} "
              f"({spearman(flat_p, flat_m):.2f}); predicted winner {res['predicted_winner']}, "
              f"measured winner {res['measured_winner']}")
    if a.output:
        with open(a.output, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
