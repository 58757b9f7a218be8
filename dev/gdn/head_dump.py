#!/usr/bin/env python3
"""head_dump.py: read a one-head GDN case written by lily-gpu-test (LILY_GPU_GDN_DUMP=FILE: a failing
chunked case's worst v head) and say which of the three GPU states (chunked, scan, CPU recurrence) the
fp64 recurrence of that head agrees with, and where the GPU conv outputs differ from a numpy conv.

File (little-endian): int32 dk, dv, K, T, pos, k head, v head; float32 A, dt_bias; conv taps (C1 x K,
C1 = 2 dk + dv: the head's q, k and v channels); ring (K x C1); S0 (dv x dk); bf16 bits: projections
(T x C1), beta logits (T), decay logits (T), the GPU conv outputs (T x C1); float32 final states (dv x
dk) of the chunked kernel, the scan and the CPU reference.

2026-12-03 (twenty-eighth session), seed 1796285961's case 14 draw 2, head 30: the fp64 recurrence on
the GPU conv outputs sits 1.4e-6 from the chunked kernel and 1.7e-3 from the scan and the CPU; the
error is rank one along token 2046's key, and the conv pass's value of v column 108 at token 2046 was
one bf16 step from the scan's (their sums were contracted into FMAs differently). Hence the pinned
conv order (gdn_pf.cuh) and the references fed the GPU's conv outputs (test_prefill.cu).

    .venv/bin/python dev/gdn/head_dump.py FILE
"""
import sys
import numpy as np

def bf(u): return (u.astype(np.uint32) << 16).view(np.float32)
def bfr(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
def rl(a, r): return np.sqrt(((a - r) ** 2).sum() / (r ** 2).sum())

b = open(sys.argv[1], 'rb').read(); off = 0
def take(n, dt):
    global off
    a = np.frombuffer(b, dt, n, off); off += n * np.dtype(dt).itemsize; return a
dk, dv, K, T, pos, kh, h = take(7, np.int32); A, dtb = take(2, np.float32); C1 = 2 * dk + dv
convw = take(C1 * K, np.float32).reshape(C1, K); ring = take(K * C1, np.float32).reshape(K, C1)
S0 = take(dv * dk, np.float32).reshape(dv, dk)
qkv = take(T * C1, np.uint16).reshape(T, C1); bq = take(T, np.uint16); aq = take(T, np.uint16)
cv = take(T * C1, np.uint16).reshape(T, C1)
Sc, Ss, Sr = (take(dv * dk, np.float32).reshape(dv, dk) for _ in range(3))
assert off == len(b), "truncated or longer file"

u = bf(cv).astype(np.float64); q, k, v = u[:, :dk], u[:, dk:2 * dk], u[:, 2 * dk:]
kn = k / np.sqrt((k * k).sum(1) + 1e-6)[:, None]
beta = bfr(1 / (1 + np.exp(-bf(bq)))).astype(np.float64)   # the kernels round beta to bf16
g = A * np.log1p(np.exp(bf(aq).astype(np.float64) + dtb))
S = S0.astype(np.float64).T.copy()                           # (dk, dv)
for t in range(T):
    S *= np.exp(g[t]); d = beta[t] * (v[t] - kn[t] @ S); S += np.outer(kn[t], d)
S = S.T
print(f"head {h} (k head {kh}), A {A:.6g}, dt_bias {dtb:.6g}, T {T}, pos {pos}")
print(f"fp64 recurrence on the GPU conv outputs vs chunked {rl(Sc, S):.2e}, scan {rl(Ss, S):.2e}, CPU {rl(Sr, S):.2e}")
for name, G in (("chunked", Sc), ("scan", Ss)):
    _, sv, vt = np.linalg.svd(G - S)
    tok = np.argsort(-np.abs(kn @ vt[0]))[:3]
    print(f"{name} - fp64: singular values {np.array2string(sv[:3], precision=2)}; the tokens whose keys lie nearest its key direction {tok.tolist()}")
# numpy conv in the GPU's order (first product rounded, then one fma a tap), exact SiLU
x = bf(qkv)
full = np.concatenate([ring[[(pos - d) % K for d in range(K - 1, 0, -1)]], x])
y = convw[:, K - 1] * full[K - 1:]
for d in range(1, K):
    y = (convw[:, K - 1 - d].astype(np.float64) * full[K - 1 - d:K - 1 - d + T] + y).astype(np.float32)
y = bfr(y); c = bfr(y / (1 + np.exp(-y)))
diff = np.argwhere(c != bf(cv))
print(f"GPU conv outputs one bf16 step or more from numpy's: {len(diff)}; the last (token, channel): {diff[-5:].tolist()}")
# (numpy's float32 exp is not the GPU's fast one, so a few steps here are the SiLU's, not the sum's.)
