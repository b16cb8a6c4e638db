#!/usr/bin/env python3
"""Turns the suite's JSON rows into results.json, results.md and gnuplot
charts. Usage: report.py ROWS.jsonl OUT_DIR"""
import json
import os
import shutil
import subprocess
import sys

# llama.cpp on the CI machine class (2-core AMD EPYC, AVX2), 2 threads,
# qwen2-0.5b shape with the gpt-2 vocabulary.
LLAMA_CPP = {
    "F16": {"decode_128": 33.0, "prefill_128": 212.0, "prefill_512": 185.2},
    "Q8_0": {"decode_128": 49.0, "prefill_128": 151.5, "prefill_512": 134.0},
    "Q4_K_M": {"decode_128": 52.2, "prefill_128": 119.3, "prefill_512": 107.4},
    "Q4_0": {"decode_128": 79.3, "prefill_128": 192.5, "prefill_512": 176.5},
}


def fmt(v, unit=""):
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:.0f}{unit}"
    return f"{v:.1f}{unit}"


def cpu_ids(m):
    """ (family F, model M) where the run recorded them: a hypervisor's
    generic model name ("AMD EPYC") hides the generation they tell."""
    if not m.get("cpu_family"):
        return ""
    return f" (family {m['cpu_family']}, model {m.get('cpu_model_number', 0)})"


def cache_size(b):
    """A cache's bytes as the machine line gives them; 0 means not detected."""
    if not b:
        return "unknown"
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def table(head, align, body):
    """A Markdown table: head and align give the columns, body the rows."""
    return ["| " + " | ".join(cells) + " |" for cells in [head, align, *body]] + [""]


def main():
    rows_path, out = sys.argv[1], sys.argv[2]
    rows = []
    with open(rows_path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    machine = next((r for r in rows
                    if r["suite"] == "machine" and r["name"] == "read_bandwidth"), None)
    by = {(r["suite"], r["name"], r["model"]): r for r in rows}
    md = ["# tokenwire benchmark", ""]
    if machine:
        m = machine["extra"]
        md += [
            f"Machine: **{m['cpu']}**{cpu_ids(m)}, {m['cpus_online']} CPUs / "
            f"{m['cores_physical']} physical "
            f"cores, ISA {m['isa']}, L1d {cache_size(m['l1d'])}, L2 {cache_size(m['l2'])}, "
            f"L3 {cache_size(m['l3'])}, memory {m['mem_total'] / 2**30:.1f} GiB, "
            f"read bandwidth {machine['value'] / 1e9:.1f} GB/s "
            f"(auto-tune: {m['auto_threads']} threads, batch {m['auto_max_batch']}, "
            f"prefill chunk {m['auto_prefill_chunk']}).",
            "",
        ]
    # comparison with llama.cpp
    md += ["## Against llama.cpp (qwen2-0.5b shape, gpt-2 vocabulary)", ""]
    body, chart = [], []
    for t, ref in LLAMA_CPP.items():
        label = f"qwen2-0.5b-{t}"
        for metric, want in ref.items():
            r = by.get(("model", metric, label))
            got = r["value"] if r else None
            bb = ""
            if r and metric.startswith("decode") and r.get("baseline"):
                bb = f"{100 * r['value'] / r['baseline']:.0f}%"
                paired = by.get(("model", "decode_bandwidth_share", label))
                if paired:
                    bb += f" (paired {100 * paired['value']:.0f}%)"
            ratio = got / want if got else None
            body.append([t, metric, fmt(got), fmt(want),
                         "–" if ratio is None else f"{ratio:.2f}x",
                         "–" if got is None else ("PASS" if got >= want else "FAIL"), bb])
            here = by.get(("llamacpp", metric, label))
            chart.append((f"{t} {metric.replace('_', ' ')}", got or 0, want,
                          here["value"] if here else 0))
    md += table(["type", "metric", "tokenwire tok/s", "llama.cpp tok/s", "ratio", "pass",
                 "bandwidth-bound %"], ["---", "---", "---:", "---:", "---:", ":---:", "---:"],
                body)
    # llama.cpp run by tools/bench.sh --llamacpp on this machine, each model
    # right after tokenwire on it
    same = [r for r in rows if r["suite"] == "llamacpp"]
    if same:
        md += ["## Against llama.cpp on this machine", "",
               f"llama.cpp: {same[0]['extra'].get('engine', '?')}, "
               f"{same[0]['extra'].get('threads', '?')} threads, "
               f"{same[0]['extra'].get('summary', 'the best of')} "
               f"{same[0]['extra'].get('reps', '?')} runs per metric "
               f"({same[0]['extra'].get('system_info', '')}).", ""]
        body = []
        for r in same:
            tw = by.get(("model", r["name"], r["model"]))
            got = tw["value"] if tw else None
            ratio = f"{got / r['value']:.2f}x" if got and r["value"] > 0 else "–"
            body.append([r["model"], r["name"], fmt(got), fmt(r["value"]), ratio])
        md += table(["model", "metric", "tokenwire tok/s", "llama.cpp tok/s", "ratio"],
                    ["---", "---", "---:", "---:", "---:"], body)
    stream = [r for r in rows if r["suite"] == "stream"]
    if stream:
        md += ["## Decode kernels against a plain read of the same matrices", "",
               "One decode step's matrices (qwen2-0.5b's shapes; llama-1b's for the K types) "
               "through the kernels and read plainly through the same pool, in alternation.", ""]
        md += table(["type", "kernels GB/s", "plain read GB/s", "share"],
                    ["---", "---:", "---:", "---:"],
                    [[r["model"], f"{r['value'] / 1e9:.1f}", f"{r['baseline'] / 1e9:.1f}",
                      f"{100 * r['ratio']:.0f}%"] for r in stream])
    # every row
    md += ["## All results", ""]
    body = []
    for r in rows:
        base = f"{fmt(r['baseline'])} ({r['baseline_name']})" if "baseline" in r else "–"
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else "–"
        val = r["value"]
        unit = r["unit"]
        if unit in ("B", "B/s") and val > 1e6:
            val, unit = val / 2**20, "MiB" if unit == "B" else "MiB/s"
        body.append([r["suite"], r["name"], r["model"], fmt(val), unit, base, ratio])
    md += table(["suite", "name", "model", "value", "unit", "baseline", "ratio"],
                ["---", "---", "---", "---:", "---", "---", "---:"], body)
    bat = [r for r in rows if r["suite"] == "batching"]
    if bat:
        md += ["## Continuous batching", ""]
        md += table(["model", "streams", "aggregate tok/s", "vs 1 stream run just before",
                     "latency p50 ms", "p99 ms", "TTFT p50 ms", "inter-token p50 ms"],
                    ["---"] + ["---:"] * 7,
                    [[r["model"], str(r["extra"]["streams"]), fmt(r["value"]),
                      f"{r.get('ratio', 1.0):.2f}x", fmt(r["extra"]["latency_ms_p50"]),
                      fmt(r["extra"]["latency_ms_p99"]), fmt(r["extra"]["ttft_ms_p50"]),
                      f"{r['extra']['itl_ms_p50']:.1f}"] for r in bat])
        for r in bat:
            if r["extra"]["streams"] == 16:
                ok = r.get("ratio", 0) >= 3.0
                md += [f"16 streams vs 1 ({r['model']}): {r.get('ratio', 0):.2f}x — target >= 3x: "
                       f"**{'PASS' if ok else 'FAIL'}**", ""]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"rows": rows, "llama_cpp_reference": LLAMA_CPP}, f, indent=1)
    # charts
    if not shutil.which("gnuplot"):
        print("report: gnuplot not found; no charts", file=sys.stderr)
        return
    dat = os.path.join(out, "vs_llama_cpp.dat")
    with open(dat, "w") as f:
        for name, got, want, here in chart:
            f.write(f"\"{name}\" {got:.3f} {want:.3f} {here:.3f}\n")
    here_plot = (", '' using 4 title 'llama.cpp on this machine'"
                 if any(row[3] for row in chart) else "")
    script = f"""
set terminal pngcairo size 1200,600 noenhanced
set output '{os.path.join(out, "vs_llama_cpp.png")}'
set title 'tokenwire vs llama.cpp, qwen2-0.5b shape (tok/s, higher is better)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -35
set key top right
set grid ytics
plot '{dat}' using 2:xtic(1) title 'tokenwire', '' using 3 title 'llama.cpp (reference)'{here_plot}
"""
    if bat:
        bdat = os.path.join(out, "batching.dat")
        with open(bdat, "w") as f:
            for r in bat:
                f.write(f"{r['extra']['streams']} {r['value']:.3f} "
                        f"{r['extra']['latency_ms_p50']:.1f}\n")
        script += f"""
set output '{os.path.join(out, "batching.png")}'
set title 'continuous batching: aggregate tok/s and p50 latency by concurrent streams'
set style data linespoints
set logscale x 2
set xtics rotate by 0
set xlabel 'concurrent streams'
set ylabel 'aggregate tok/s'
set y2label 'p50 latency (ms)'
set y2tics
plot '{bdat}' using 1:2 title 'aggregate tok/s' axes x1y1, '' using 1:3 title 'p50 latency ms' axes x1y2
"""
    for term in ("pngcairo", "png"):
        r = subprocess.run(["gnuplot"], input=script.replace("pngcairo", term), text=True,
                           capture_output=True)
        if r.returncode == 0:
            break
    else:
        print("report: gnuplot failed: " + r.stderr.strip(), file=sys.stderr)


if __name__ == "__main__":
    main()
