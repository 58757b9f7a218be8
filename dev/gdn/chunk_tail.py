#!/usr/bin/env python3
"""chunk_tail.py: is there a tail in the chunked GDN form's fp32 precision at the real dims?

The chunked form (spec section 4: explicit L^-1 by forward substitution, U, W, Delta, the state
update) in plain fp32 against the token recurrence in fp64, on inputs drawn as test_prefill's
gdn_make_inputs draws them (conv taps 0.5 N(0,1), K = 4, bf16 N(0,1) projections and gate logits,
A = -e^U(-1,1), dt_bias N(0,1), a carried-in ring and 0.1 N(0,1) state; conv outputs, SiLU and beta
rounded to bf16 as the kernels round them), hk 16, hv 32, dk = dv = 128, T 2048, pos 300: the case
`gdn prefill chunked ... T=2048 pos=300` of lily-gpu-test prefill. Prints the final state's rel. L2,
the worst head's, and the largest |L^-1| entry met (> 1 would mean a chunk that amplifies rounding).

2026-12-03 (twenty-seventh session), seeds 0 .. 13: state rel. L2 4.1e-7 .. 8.7e-7, worst head
<= 3.7e-6, max |L^-1| 1.00 in every seed (~15 s a seed). The GPU kernels sit there too (7e-7 ..
2.5e-6); the one failure at 3.9e-4 (seed 1796285961, mma.sync phase B) is not the algorithm's
precision. (Twenty-eighth session: it was one conv output a bf16 step apart between the conv pass
and the scan, in a late token of a fast-decaying head, and the chunked kernel was the right one;
dev/gdn/head_dump.py.)

    .venv/bin/python dev/gdn/chunk_tail.py 0 12
"""
import numpy as np, sys
def bf(x):
    x = np.asarray(x, np.float32); u = x.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)
def silu(x): return x / (1 + np.exp(-x))
def run(seed, hk=16, hv=32, dk=128, dv=128, K=4, T=2048, pos=300):
    r = np.random.default_rng(seed)
    C = 2*hk*dk + hv*dv
    convw = (0.5*r.standard_normal((C, K))).astype(np.float32)
    dtb = r.standard_normal(hv).astype(np.float32); A = -np.exp(r.uniform(-1, 1, hv)).astype(np.float32)
    qkv = bf(r.standard_normal((T, C))); bq = bf(r.standard_normal((T, hv))); aq = bf(r.standard_normal((T, hv)))
    ring = bf(r.standard_normal((K-1, C))) # the K-1 previous inputs, oldest first
    S0 = (0.1*r.standard_normal((hv, dk, dv))).astype(np.float32)   # (h, k, v)
    full = np.concatenate([ring, qkv]).astype(np.float64)
    acc = sum(convw[:, K-1-d].astype(np.float64) * full[K-1-d:K-1-d+T] for d in range(K))
    u = bf(silu(bf(acc)).astype(np.float32))
    q = u[:, :hk*dk].reshape(T, hk, dk); k = u[:, hk*dk:2*hk*dk].reshape(T, hk, dk); v = u[:, 2*hk*dk:].reshape(T, hv, dv)
    grp = hv // hk
    q = np.repeat(q, grp, axis=1).astype(np.float64); k = np.repeat(k, grp, axis=1).astype(np.float64); v = v.astype(np.float64)
    q = q / np.sqrt((q*q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(dk); k = k / np.sqrt((k*k).sum(-1, keepdims=True) + 1e-6)
    beta = bf(1/(1+np.exp(-bq.astype(np.float64)))).astype(np.float64)
    xa = aq.astype(np.float64) + dtb; sp = np.where(xa > 20, xa, np.log1p(np.exp(np.minimum(xa, 20))))
    g = A * sp   # (T, hv) log-decay
    # recurrence, fp64
    S = S0.astype(np.float64).copy()
    for t in range(T):
        S *= np.exp(g[t])[:, None, None]
        kv = np.einsum('hk,hkv->hv', k[t], S)
        d = beta[t][:, None] * (v[t] - kv)
        S += k[t][:, :, None] * d[:, None, :]
    Sref = S
    # chunked, fp32 (explicit inverse by forward substitution as spec 4 item 4)
    f = np.float32
    S = S0.astype(f).copy(); xmax = np.zeros(hv); worst_chunk = np.zeros(hv)
    for c0 in range(0, T, 64):
        n = min(64, T - c0)
        for h in range(hv):
            kk = k[c0:c0+n, h].astype(f); qq = q[c0:c0+n, h].astype(f); vv = v[c0:c0+n, h].astype(f)
            bb = beta[c0:c0+n, h].astype(f); G = np.cumsum(g[c0:c0+n, h].astype(f)).astype(f)
            Dm = np.tril(np.exp(np.minimum(G[:, None] - G[None, :], 0)).astype(f))
            Am = np.tril(bb[:, None] * (kk @ kk.T) * Dm, -1).astype(f)
            X = np.eye(n, dtype=f)
            for i in range(1, n):
                X[i, :i] = -(Am[i, :i] @ X[:i, :i])
            xmax[h] = max(xmax[h], np.abs(X).max())
            U = X @ (bb[:, None] * vv); W = X @ ((bb * np.exp(G))[:, None] * kk)
            Dl = U - W @ S[h]
            S[h] = np.exp(G[-1]) * S[h] + (np.exp(G[-1] - G)[:, None] * kk).T @ Dl
    eh = np.sqrt(((S - Sref)**2).sum((1, 2)) / (Sref**2).sum((1, 2)))
    e = np.sqrt(((S - Sref)**2).sum() / (Sref**2).sum())
    return e, eh, xmax
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    e, eh, xmax = run(seed)
    print(f"seed {seed}: state rel L2 {e:.2e}, worst head {eh.argmax()} {eh.max():.2e}, max |X| {xmax.max():.2f}", flush=True)
