#!/usr/bin/env python3
"""stall.py CSV [N]: summarise Nsight Compute's source page of one kernel (`ncu -i REP --page source --csv
--print-source sass`): the warp stall samples by reason over the kernel, then the N SASS lines with the
most samples (row index, instruction, its largest reason). Used by common.sh's stall_prof."""
import collections
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
hdr, data = rows[1], rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]


def num(r, h):
    try:
        return int(r[ix[h]] or 0)
    except (ValueError, IndexError):
        return 0


tot = collections.Counter()
for r in data:
    for h in reasons:
        tot[h] += num(r, h)
S = sum(tot.values()) or 1
print("stall samples", S)
for h, v in tot.most_common(10):
    print(f"{h:28s} {v:8d} {100 * v / S:5.1f}%")
lines = []
for n, r in enumerate(data):
    v = num(r, "Warp Stall Sampling (All Samples)")
    top = max(reasons, key=lambda h: num(r, h))
    lines.append((v, n, r[ix["Source"]].strip(), top, num(r, top)))
lines.sort(reverse=True)
for v, n, src, top, tv in lines[: int(sys.argv[2]) if len(sys.argv) > 2 else 30]:
    print(f"{v:7d} {100 * v / S:4.1f}% {n:5d} {src[:70]:70s} {top} {tv}")
