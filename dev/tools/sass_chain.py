# sass_chain.py: where a kernel's warp waits on memory after griddepcontrol.wait, from its SASS alone.
# Usage: python3 dev/tools/sass_chain.py CUOBJDUMP OBJ.o KERNEL-SUBSTRING [N]
#
# Walks the instructions after the wait (ACQBULK) in program order, as one warp issuing in order would if it
# ran every instruction (branches are not followed: the skipped paths are counted too, so read each finding
# against the source). Each global load (LDG, LD, ATOM) counts as one round trip: its result is ready one
# round after it issues; a shared-memory load or a shuffle is ready at once. An instruction issues in the
# round its operands are ready and never before the instruction ahead of it. Printed: each global load with
# the round it issues in and the round its address could be ready in (its chain of loads alone). A load issued
# later than that waited on an unrelated earlier load's consumer ahead of it in the stream (in-order issue): such a
# consumer, moved after the load, saves a round trip (the flag word in gemv2's prologue, 2026-12-05).
# Also the round of the first tensor-core instruction and of the end.
import re, sys

from sass_cmp import opcode, sass_code, unpredicated

tool, obj, pat = sys.argv[1:4]
nmax = int(sys.argv[4]) if len(sys.argv) > 4 else 60
funcs = sass_code(tool, obj)
names = [f for f in funcs if pat in f]
if len(names) != 1:
    sys.exit(f'{len(names)} kernels match {pat!r}: ' + ' '.join(names[:8]))
ins = funcs[names[0]]
GLOBAL = ('LDG', 'LD.', 'ATOM', 'ATOMG')


def regs(s):  # the registers and predicates named in s (a .64 / .128 destination's others: expand)
    return re.findall(r'\b(U?R\d+|U?P\d+)\b', s)


def width(op):
    return 4 if '.128' in op else 2 if '.64' in op else 1


def expand(r, w):
    m = re.match(r'(U?R)(\d+)', r)
    return [f'{m.group(1)}{int(m.group(2)) + k}' for k in range(w)] if m else [r]


start = next((i for i, (_, t) in enumerate(ins) if t.startswith('ACQBULK')), None)
if start is None:
    sys.exit('no griddepcontrol.wait (ACQBULK) in ' + names[0])
ready, depth, now, shown = {}, {}, 0, 0  # ready: the round a value is there; depth: its loads' chain alone
first_mma = None
for a, t in ins[start + 1:]:
    body = unpredicated(t)
    pred = re.match(r'^@!?(U?P\w+)', t)
    op = opcode(t)
    args = [x.strip() for x in body[len(op):].split(',')]
    is_store = op.startswith(('ST', 'RED', 'BAR', 'BRA', 'EXIT', 'RET', 'WARPSYNC', 'BSYNC', 'BSSY'))
    dst = [] if is_store or not args or not args[0] else expand(regs(args[0])[0], width(op)) if regs(args[0]) else []
    srcs = [r for x in (args if is_store else args[1:]) for r in regs(x)]
    if pred:
        srcs.append(pred.group(1))
    now = max(now, max([ready.get(r, 0) for r in srcs], default=0))
    addr_ready = max([depth.get(r, 0) for r in srcs], default=0)
    if op.startswith(GLOBAL):
        if shown < nmax:
            late = ' <- waited on an earlier load' if now > addr_ready else ''
            print(f'{a}  round {now}  (address ready in {addr_ready})  {t}{late}')
            shown += 1
        for r in dst:
            ready[r], depth[r] = now + 1, addr_ready + 1
    else:
        for r in dst:
            ready[r], depth[r] = now, addr_ready
    if first_mma is None and 'MMA' in op:
        first_mma = (a, now)
print(f'first MMA: {first_mma[0]} in round {first_mma[1]}' if first_mma else 'no MMA')
print(f'end of the stream: round {now}')
