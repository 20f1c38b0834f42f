"""Per-kernel device time from an Nsight Compute CSV (--metrics gpu__time_duration.sum --csv --print-units base): the
launches summed per kernel name, the 14 largest; with --sequence N also the first N launches in order (one line each:
a launch's kernels around it tell which implementation launched it, e.g. a variant from its unprotected twin).

    python experiments/scripts/ncu_summary.py FILE.csv [--sequence N]
"""
import collections
import csv
import sys



def short_name(full: str) -> str:
    """A kernel's name without namespaces and arguments; CUTLASS's kernels named by their kernel type (and the kmeans
    arg-min epilogue's template arguments)."""
    full = full.replace("<unnamed>::", "").replace("(anonymous namespace)::", "").replace("void ", "")
    name = full.split("(")[0].split("<")[0]
    if name.endswith("device_kernel") and "<" in full:
        name += "<" + full.split("<", 1)[1].split(">")[0].split("::")[-1] + ">"
        if "ArgMinDirect<" in full:
            name += "[" + full[full.index("ArgMinDirect<"):].split(">")[0].removeprefix("ArgMinDirect") + ">]"
    return name[-48:]


def main(path: str, sequence: int = 0) -> None:
    rows = list(csv.reader(open(path)))
    i = next((j for j, r in enumerate(rows) if r and r[0] == "ID"), None)
    if i is None:
        print(path, "no rows")
        return
    h = rows[i]
    k, v = h.index("Kernel Name"), h.index("Metric Value")
    tot, cnt = collections.Counter(), collections.Counter()
    order = []
    for r in rows[i + 1:]:
        if len(r) != len(h):
            continue
        name = short_name(r[k])
        if len(order) < sequence:
            order.append((name, float(r[v].replace(",", "")) / 1e3))
        tot[name] += float(r[v].replace(",", "")) / 1e3
        cnt[name] += 1
    print(f"== {path.rsplit('/', 1)[-1]}")
    for name, us in tot.most_common(14):
        print(f"  {name:<48} {cnt[name]:5d} x {us / cnt[name]:9.1f} us = {us:10.1f} us")
    for i, (name, us) in enumerate(order):
        print(f"  #{i:<4d} {name:<48} {us:9.1f} us")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--sequence" else 0)
