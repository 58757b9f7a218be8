# dev/attn-flash/emu.py: a lane-by-lane numpy emulation of src/cuda/attn_flash.cu's fa_kernel (ldmatrix
# .x4/.x4.trans and mma.m16n8k16 fragment layouts as the PTX ISA defines them, cp.async tiles,
# causal mask, online softmax, bf16 P, GQA row packing, epilogue), compared with a float64 softmax
# from the spec formula. Written to check the index arithmetic on a machine without a GPU; slow
# (small shapes only), not part of any suite. Run: /work/venv-ref/bin/python dev/attn-flash/emu.py
# (or any python with numpy). Expected: rel_l2 ~1e-3 per case (bf16 rounding); a mask shifted by one
# position gives > 1e-1. Keep in step with the kernel when its tiling changes.
import numpy as np, math
BM, BN, NW = 64, 32, 4
def bf(x):
    x = np.asarray(x, np.float32).copy(); u = x.view(np.uint32)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32)
def ldsm(mem, addrs, trans):  # addrs[lane] = (row, col) of the lane's row start; returns r[lane][4] as pairs
    out = [[None]*4 for _ in range(32)]
    for i in range(4):
        rows = [addrs[8*i + j] for j in range(8)]
        M = np.array([[mem[r][c + k] for k in range(8)] for (r, c) in rows])  # 8x8
        if trans: M = M.T
        for T in range(32):
            out[T][i] = (M[T//4][2*(T%4)], M[T//4][2*(T%4)+1])
    return out
def mma(C, A, B0, B1):  # C[lane][4], A[lane][4] pairs, B0/B1[lane] pairs
    Am = np.zeros((16,16)); Bm = np.zeros((16,8))
    for T in range(32):
        g, t = T//4, T%4
        for reg,(r,c) in enumerate([(g,2*t),(g+8,2*t),(g,2*t+8),(g+8,2*t+8)]):
            Am[r][c], Am[r][c+1] = A[T][reg]
        Bm[2*t][g], Bm[2*t+1][g] = B0[T]; Bm[2*t+8][g], Bm[2*t+9][g] = B1[T]
    Cm = Am @ Bm
    for T in range(32):
        g, t = T//4, T%4
        C[T][0] += Cm[g][2*t]; C[T][1] += Cm[g][2*t+1]; C[T][2] += Cm[g+8][2*t]; C[T][3] += Cm[g+8][2*t+1]
def kernel(hq, hkv, D, T, pos0, q, kc, vc, qg, maxc):
    group = hq // hkv; nrows = T*group; ntiles = (nrows + BM - 1)//BM
    o = np.full((T, hq, D), np.nan)
    for kvh in range(hkv):
        for bx in range(ntiles):
            r0 = (ntiles - 1 - bx)*BM
            t_first = r0 // group; t_last = (min(r0+BM, nrows)-1)//group
            kend = pos0 + t_last + 1; kfull = pos0 + t_first + 1; nkt = (kend + BN - 1)//BN
            Qs = np.zeros((BM, D+8))
            for r in range(BM):
                rg = r0 + r
                if rg < nrows: Qs[r,:D] = bf(q[rg//group, kvh*group + rg % group])
            for w in range(NW):
                lim = [[pos0 + min((r0 + w*16 + (L>>2) + 8*rr)//group, T-1) for rr in range(2)] for L in range(32)]
                oacc = [[[0.0]*4 for _ in range(D//8)] for _ in range(32)]
                mrow = [[-np.inf]*2 for _ in range(32)]; lrow = [[0.0]*2 for _ in range(32)]
                sl2 = 1/math.sqrt(D)*1.4426950408889634
                for kt in range(nkt):
                    Kt = np.zeros((BN, D+8)); Vt = np.zeros((BN, D+8))
                    for r in range(BN):
                        p = kt*BN + r
                        if p < kend: Kt[r,:D] = kc[kvh,p]; Vt[r,:D] = vc[kvh,p]
                    s = [[[0.0]*4 for _ in range(BN//8)] for _ in range(32)]
                    for j in range(D//16):
                        a = ldsm(Qs, [(w*16 + ((L>>3)&1)*8 + (L&7), ((L>>3)>>1)*8 + j*16) for L in range(32)], False)
                        for i in range(BN//16):
                            b = ldsm(Kt, [(((L>>3)>>1)*8 + (L&7) + i*16, ((L>>3)&1)*8 + j*16) for L in range(32)], False)
                            S0 = [s[L][2*i] for L in range(32)]; S1 = [s[L][2*i+1] for L in range(32)]
                            mma(S0, [a[L] for L in range(32)], [b[L][0] for L in range(32)], [b[L][1] for L in range(32)])
                            mma(S1, [a[L] for L in range(32)], [b[L][2] for L in range(32)], [b[L][3] for L in range(32)])
                    kbase = kt*BN
                    pa = [[[None]*4 for _ in range(BN//16)] for _ in range(32)]
                    mx = [[0,0] for _ in range(32)]; corr = [[0,0] for _ in range(32)]
                    for L in range(32):
                        tq = L & 3
                        if kbase + BN > kfull:
                            for i in range(BN//8):
                                for e in range(4):
                                    if kbase + i*8 + 2*tq + (e&1) > lim[L][e>>1]: s[L][i][e] = -np.inf
                        mx[L] = [max([mrow[L][0]] + [max(s[L][i][0], s[L][i][1]) for i in range(BN//8)]),
                                 max([mrow[L][1]] + [max(s[L][i][2], s[L][i][3]) for i in range(BN//8)])]
                    for L in range(32):  # quad max
                        base = L & ~3
                        for rr in range(2):
                            m = max(mx[base+k][rr] for k in range(4))
                            corr[L][rr] = 2**((mrow[L][rr] - m)*sl2) if mrow[L][rr] != -np.inf else 0.0
                            mrow[L][rr] = m
                    for L in range(32):
                        ls = [0.0, 0.0]
                        for i in range(BN//8):
                            ps = [float(bf(2**((s[L][i][e] - mrow[L][e>>1])*sl2))) for e in range(4)]
                            ls[0] += ps[0] + ps[1]; ls[1] += ps[2] + ps[3]
                            pa[L][i>>1][(i&1)*2] = (ps[0], ps[1]); pa[L][i>>1][(i&1)*2+1] = (ps[2], ps[3])
                        for rr in range(2): lrow[L][rr] = lrow[L][rr]*corr[L][rr] + ls[rr]
                        for i in range(D//8):
                            for e in range(4): oacc[L][i][e] *= corr[L][e>>1]
                    for i in range(D//16):
                        for j in range(BN//16):
                            b = ldsm(Vt, [(((L>>3)&1)*8 + (L&7) + j*16, ((L>>3)>>1)*8 + i*16) for L in range(32)], True)
                            A = [pa[L][j] for L in range(32)]
                            O0 = [oacc[L][2*i] for L in range(32)]; O1 = [oacc[L][2*i+1] for L in range(32)]
                            mma(O0, A, [b[L][0] for L in range(32)], [b[L][1] for L in range(32)])
                            mma(O1, A, [b[L][2] for L in range(32)], [b[L][3] for L in range(32)])
                for L in range(32):
                    g, tq = L >> 2, L & 3
                    for rr in range(2):
                        base = L & ~3; l = sum(lrow[base+k][rr] for k in range(4))
                        rg = r0 + w*16 + g + 8*rr
                        if rg >= nrows: continue
                        t, h = rg//group, kvh*group + rg % group
                        for i in range(D//8):
                            c = i*8 + 2*tq
                            for e in range(2):
                                gt = qg[t, h, D + c + e]
                                o[t, h, c+e] = bf(bf(oacc[L][i][2*rr+e]/l) * (1/(1+math.exp(-gt))))
    return o
def ref(hq, hkv, D, T, pos0, q, kc, vc, qg):
    group = hq//hkv; o = np.zeros((T, hq, D))
    for t in range(T):
        for h in range(hq):
            kv = h//group; L = pos0 + t + 1
            s = kc[kv,:L] @ q[t,h].astype(np.float64) / math.sqrt(D); s = np.exp(s - s.max())
            a = (s @ vc[kv,:L]) / s.sum()
            o[t,h] = bf(bf(a) / (1 + np.exp(-qg[t,h,D:])))
    return o
rng = np.random.default_rng(1)
for (hq, hkv, D, T, pos0) in [(6,2,32,37,0), (6,2,16,11,40), (4,4,32,3,70), (16,2,32,9,5), (6,3,48,25,31), (8,1,16,5,0)]:
    maxc = pos0 + T + 19
    kc = bf(rng.normal(size=(hkv, maxc, D))); vc = bf(rng.normal(size=(hkv, maxc, D)))
    q = bf(2*rng.normal(size=(T, hq, D))); qg = bf(rng.normal(size=(T, hq, 2*D)))
    got = kernel(hq, hkv, D, T, pos0, q, kc, vc, qg, maxc); ex = ref(hq, hkv, D, T, pos0, q, kc, vc, qg)
    e = np.linalg.norm(got - ex)/np.linalg.norm(ex)
    print(hq, hkv, D, T, pos0, "nan" if np.isnan(got).any() else "finite", "rel_l2 %.2e" % e, flush=True)
