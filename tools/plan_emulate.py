#!/usr/bin/python3
"""The planner's ranking on modelled topologies, measured with link emulation on this machine.

    tools/plan_emulate.py --vidax build/ci/vidax --local /tmp/vidax_plan_validate_local_4.json \
        -o docs/results/plan_emulation.json

Each modelled topology keeps this machine's measured devices (the `local` topology file that
`vidax plan --write-topology` wrote for 4 processes) and replaces the fabric with a slower one:
two "nodes" of two processes joined by a slow network, and a 2x2 torus without wrap-around with
slow links. `vidax plan` ranks the meshes and their placements on it; every ranked mesh is then
run under `mpirun -n 4 vidax bench dit` with VIDAX_SIMULATE_LINKS (each collective stretched to
its modelled duration) in every placement the planner simulated, and the measured ranking is
compared with the predicted one.
"""
import argparse
import json
import sys

from plan_tools import run, spearman

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
          "-x", "OMP_NUM_THREADS=1", "-x", "VIDAX_SIMULATE_LINKS", "-x",
          "VIDAX_SIMULATE_PLACEMENT", "-n", "4"]

FABRICS = {
    "two-nodes": {"kind": "switch", "nodes": 2, "devices_per_node": 2,
                  "intra": {"kind": "shm", "GBps": 2.0, "latency_us": 0},
                  "inter": {"GBps": 0.1, "latency_us": 200}},
    "torus-2x2-nowrap": {"kind": "torus", "dims": [2, 2], "wrap": [False, False],
                         "link_GBps": 0.15, "hop_latency_us": 100},
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vidax", default="build/ci/vidax")
    ap.add_argument("--local", required=True, help="measured local topology of 4 processes")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--size", default="416x240")
    ap.add_argument("--frames", type=int, default=17)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    common = ["--model", "wan2.1-t2v-1.3b", "--layers", str(a.layers), "--size", a.size,
              "--frames", str(a.frames)]
    with open(a.local) as f:
        local = json.load(f)
    out = []
    for name, fabric in FABRICS.items():
        # The measured collectives and waits stay: the emulated run's collectives run on this
        # machine first, then are stretched to the modelled links (the planner prices each at
        # the longer of the two).
        topo = dict(local, name=name, fabric=fabric)
        path = f"/tmp/vidax_plan_emulate_{name}.json"
        with open(path, "w") as f:
            json.dump(topo, f)
        plan = json.loads(run([a.vidax, "plan", *common, "--topology", path, "--weights",
                               "resident", "--explain", "--json"], {"OMP_NUM_THREADS": "1"}))
        rows = []
        for c in [c for c in plan["candidates"] if c["status"] == "ranked"]:
            for p in c["placements"]:  # every placement the planner simulated
                env = {"VIDAX_SIMULATE_LINKS": path,
                       "VIDAX_SIMULATE_PLACEMENT": ",".join(str(d) for d in p["devices"])}
                m = json.loads(run(MPIRUN + [a.vidax, "bench", "dit", *common, "--guided",
                                             "--json", "--no-peak", "--iters", "2", "--mesh",
                                             c["mesh"]], env))
                row = {"topology": name, "mesh": c["mesh"], "placement": p["placement"],
                       "devices": p["devices"], "predicted_step_s": p["step_s"],
                       "measured_step_s": m["seconds_per_step"]}
                row["error"] = row["predicted_step_s"] / row["measured_step_s"] - 1
                rows.append(row)
                print(f"{name} {c['mesh']:30s} {p['placement'][:48]:48s} predicted "
                      f"{row['predicted_step_s']:.3f} measured {row['measured_step_s']:.3f} "
                      f"({100 * row['error']:+.1f}%)", file=sys.stderr)
        rho = spearman([r["predicted_step_s"] for r in rows], [r["measured_step_s"] for r in rows])
        best_p = min(rows, key=lambda r: r["predicted_step_s"])
        best_m = min(rows, key=lambda r: r["measured_step_s"])
        out.append({"topology": name, "fabric": fabric, "rows": rows, "spearman": rho,
                    "predicted_best": [best_p["mesh"], best_p["placement"]],
                    "measured_best": [best_m["mesh"], best_m["placement"]]})
    print("| topology | mesh | placement | predicted s/step | measured s/step | error |")
    print("|---|---|---|---|---|---|")
    for t in out:
        for r in sorted(t["rows"], key=lambda r: r["measured_step_s"]):
            print(f"| {t['topology']} | {r['mesh']} | {r['placement']} | "
                  f"{r['predicted_step_s']:.3f} | {r['measured_step_s']:.3f} | "
                  f"{100 * r['error']:+.1f}% |")
    for t in out:
        print(f"\n{t['topology']}: Spearman {t['spearman']:.2f}; predicted best "
              f"{t['predicted_best']}, measured best "
              f"{t['measured_best']}")
    if a.output:
        with open(a.output, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
