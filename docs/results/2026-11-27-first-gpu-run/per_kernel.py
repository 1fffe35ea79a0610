"""The per-kernel table of an `ncu --metrics gpu__time_duration.sum --print-summary per-kernel`
log: kernel, grid x block, invocations, mean duration, and its time per forward when
`--forwards N` forwards of one kind ran (the rows whose grid belongs to those forwards)."""
import argparse
import re

ap = argparse.ArgumentParser()
ap.add_argument("log")
ap.add_argument("--forwards", type=int, default=1)
a = ap.parse_args()
lines = open(a.log).read().splitlines()
head = re.compile(r"\s+(.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Device \d+, CC [\d.]+, "
                  r"Invocations (\d+)")
print("| kernel | grid × block | invocations | mean µs | µs per forward |")
print("|---|---|---|---|---|")
for i, line in enumerate(lines):
    m = head.match(line)
    if not m:
        continue
    name = re.sub(r"\(.*", "", m.group(1)).replace("selfspec::<unnamed>::", "").replace("void ", "")
    name = re.sub(r"<unnamed>::|selfspec::", "", name)
    grid = int(m.group(2)) * int(m.group(3)) * int(m.group(4))
    block = int(m.group(5)) * int(m.group(6)) * int(m.group(7))
    inv = int(m.group(8))
    metric = next(l for l in lines[i + 1:i + 8] if "gpu__time_duration.sum" in l)
    mean = float(metric.split()[-1])
    print(f"| `{name}` | {grid} × {block} | {inv} | {mean:.2f} | {mean * inv / a.forwards:.1f} |")
