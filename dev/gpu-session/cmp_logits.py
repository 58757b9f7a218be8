# cmp_logits.py A B VOCAB: two `lily logits` outputs (float32 [n x VOCAB]) compared where they are not
# expected to be bitwise equal: rel. L2 over all, the worst row's, and how many rows keep their argmax.
import sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype=np.float32).reshape(-1, int(sys.argv[3])).astype(np.float64)
b = np.fromfile(sys.argv[2], dtype=np.float32).reshape(-1, int(sys.argv[3])).astype(np.float64)
rows = np.linalg.norm(a - b, axis=1) / np.maximum(np.linalg.norm(a, axis=1), 1e-30)
same = int((a.argmax(1) == b.argmax(1)).sum())
print(f"logits {a.shape[0]} rows: rel_l2 {np.linalg.norm(a - b) / np.linalg.norm(a):.2e}, worst row {rows.max():.2e}, "
      f"argmax equal {same}/{a.shape[0]}, nonfinite {int((~np.isfinite(b)).sum())}")
