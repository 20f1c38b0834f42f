"""Per-kernel device time from an Nsight Compute CSV (--metrics gpu__time_duration.sum --csv --print-units base): the
launches summed per kernel name, the 14 largest.

    python experiments/scripts/ncu_summary.py FILE.csv
"""
import collections
import csv
import sys



def main(path: str) -> None:
    rows = list(csv.reader(open(path)))
    i = next((j for j, r in enumerate(rows) if r and r[0] == "ID"), None)
    if i is None:
        print(path, "no rows")
        return
    h = rows[i]
    k, v = h.index("Kernel Name"), h.index("Metric Value")
    tot, cnt = collections.Counter(), collections.Counter()
    for r in rows[i + 1:]:
        if len(r) != len(h):
            continue
        full = r[k].replace("<unnamed>::", "").replace("(anonymous namespace)::", "").replace("void ", "")
        name = full.split("(")[0].split("<")[0]
        if name.endswith("device_kernel") and "<" in full:  # CUTLASS's kernels: named by their kernel type
            name += "<" + full.split("<", 1)[1].split(">")[0].split("::")[-1] + ">"
        name = name[-48:]
        tot[name] += float(r[v].replace(",", "")) / 1e3
        cnt[name] += 1
    print(f"== {path.rsplit('/', 1)[-1]}")
    for name, us in tot.most_common(14):
        print(f"  {name:<48} {cnt[name]:5d} x {us / cnt[name]:9.1f} us = {us:10.1f} us")


if __name__ == "__main__":
    main(sys.argv[1])
