"""Ablation copies of a generated protected kmeans project: each copy leaves parts of the assign kernel's protection
out (a text edit of the generated source), so that timing the copies beside the full build places the protected
kernel's cost. Measurement only: a copy without its checks verifies nothing and is never a product variant.

    python experiments/scripts/kmeans_ablate.py PROJECT KERNEL OUTDIR
makes OUTDIR/<cut>/ (a copy of PROJECT with KERNEL's source edited) for every cut below.
"""

import shutil
import sys
from pathlib import Path

EDITS = {
    # the DMR of the arg-min (the thread's scan, the quad's shuffles, the merge): never taken, so dead code
    "argmin": [("if (bi != bi2 || !(bv == bv2 || (bv != bv && bv2 != bv2))) {", "if (false) {"),
               ("if (__any_sync(0xffffffffu, bv != bv2q || bi != bi2q)) {", "if (false) {"),
               ("if (bv != bv2 || bi != bi2) {", "if (false) {")],
    # the row sums and the comparison with the references (the barriers stay)
    "verify": [("      row_sums(s, acc, wm, wn, g, t, false);\n", ""),
               ("for (int ri = 0; ri < RPT; ++ri) {\n        const int r = tid + ri * THREADS;\n        if (r >= MT) continue;\n        T sum",
                "for (int ri = 0; ri < 0; ++ri) {\n        const int r = tid + ri * THREADS;\n        if (r >= MT) continue;\n        T sum")],
    # the reference fragments (only with verify cut: unverified references would flag every row)
    "refs": [("const bool do_ref = ct % GT == 0 || attempt > 0;", "const bool do_ref = false;")],
}
CUTS = {"verify": ["verify"], "verify+refs": ["verify", "refs"], "argmin": ["argmin"],
        "all": ["verify", "refs", "argmin"]}


def main(project: str, kernel: str, outdir: str) -> None:
    src = Path(project)
    for cut, parts in CUTS.items():
        dst = Path(outdir) / cut.replace("+", "_")
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("build", "bin"))
        f = dst / kernel / f"{kernel}.cu"
        text = f.read_text()
        for part in parts:
            for old, new in EDITS[part]:
                if text.count(old) != 1:
                    sys.exit(f"{f}: the text to cut for {part!r} occurs {text.count(old)} times")
                text = text.replace(old, new)
        f.write_text(text)
        print(dst)


if __name__ == "__main__":
    main(*sys.argv[1:4])
