#!/usr/bin/env python3
"""sim_schedule.py: a CPU model of persist_gv2.cu's schedule (thread 0 of each block feeds a ring
of NSLOT slots, the block consumes its chunks in order, a monotone counter is the grid barrier, the
routed phases' requests wait for the router phase). Blocks advance in random order and copies land
after random delays; the model reports a deadlock when no block can move. It found the hang of the
first version (a request refused while the gate was shut was never retried after the barrier
opened) and checks the fix: `sim_schedule.py` runs both and exits non-zero unless the old feeder
deadlocks and the fixed one finishes in every trial."""
import random
import sys

NSLOT = 9
SHAPES = [(12352, 16, -1), (2048, 8, -1), (1280, 16, -1), (8192, 16, 2), (2048, 8, 2)]  # rows, rows/slot, gate


def run(fixed, nb, layers, mode, seed):
    rnd = random.Random(seed)
    ph = []
    for L in range(layers):
        for j, (rows, nr, g) in enumerate(SHAPES):
            gate = (L * 5 + g) if g >= 0 else -1
            ph.append(((rows + nr - 1) // nr, gate))
    nph = len(ph)
    ctr = 0
    landed = {}  # (block, fill index) -> step at which the copy lands

    class B:
        pass

    blocks = []
    for b in range(nb):
        x = B()
        x.fp, x.fk, x.issued = 0, 0, 0      # feeder cursor
        x.p, x.state, x.c, x.consumed = 0, "start", b, 0
        blocks.append(x)

    def feed(b, x, step):
        while x.issued - x.consumed < NSLOT and x.fp < nph:
            nchunk, gate = ph[x.fp]
            c = b + x.fk * nb
            if c >= nchunk:
                x.fp, x.fk = x.fp + 1, 0
                continue
            g = x.fp - 1 if mode == 1 else gate
            if g >= 0 and ctr < (g + 1) * nb:
                return
            landed[(b, x.issued)] = step + rnd.randint(1, 40)
            x.issued += 1
            x.fk += 1

    step, done = 0, 0
    while done < nb:
        step += 1
        moved = False
        order = list(range(nb))
        rnd.shuffle(order)
        for b in order:
            x = blocks[b]
            if x.state == "done":
                continue
            if x.state == "start":
                feed(b, x, step)
                x.state, moved = "barrier", True
            elif x.state == "barrier":
                if x.p and ctr < x.p * nb:
                    feed(b, x, step)  # the spin loop feeds
                    if any(t > step for t in landed.values()):
                        moved = True  # copies in flight still count as progress
                    continue
                if fixed:
                    feed(b, x, step)
                x.state, x.c, moved = "chunks", b, True
            elif x.state == "chunks":
                nchunk, _ = ph[x.p]
                if x.c >= nchunk:
                    ctr += 1
                    x.p += 1
                    x.state = "barrier" if x.p < nph else "done"
                    done += x.state == "done"
                    moved = True
                    continue
                t = landed.get((b, x.consumed))
                if t is None:
                    continue  # never requested: only this thread could request it
                if t > step:
                    moved = True
                    continue
                x.consumed += 1
                x.c += nb
                feed(b, x, step)
                moved = True
        if not moved:
            return False, step
    return True, step


def main():
    ok = True
    for mode in (0, 1):
        for fixed in (False, True):
            res = [run(fixed, 132, 3, mode, s) for s in range(3)]
            fin = sum(r[0] for r in res)
            print(f"mode {mode} ({'no run-ahead' if mode else 'run-ahead'}), {'fixed' if fixed else 'first'} feeder: "
                  f"{fin} of {len(res)} trials finish" + ("" if fin == len(res) else " (deadlock)"))
            ok = ok and (fin == len(res) if fixed else fin == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
