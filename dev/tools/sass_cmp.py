# sass_cmp.py: compare the SASS of two builds of one CUDA object, kernel by kernel (dev/tools/sass.sh cmp).
# Usage: python3 sass_cmp.py CUOBJDUMP OLD.o NEW.o [PATTERN] [RE=>REPL]
# RE=>REPL rewrites NEW's kernel names before matching (a template parameter added with a default value:
# 'ELi0EEv=>EEv' pairs gemv2_kernel<..., 0> with the old gemv2_kernel<...>).
# Per kernel (mangled name containing PATTERN): "same" when the instruction text is identical, else the
# instruction counts, registers, stack and the opcodes whose counts changed. Kernels only in one build
# are listed too. Exit status 0 when every compared kernel is the same, 1 otherwise.
import collections, re, subprocess, sys


def sass_code(tool, obj):
    """{kernel: [(address, instruction)]} of every kernel in obj (cuobjdump -sass); sass_chain.py uses it too."""
    sass = subprocess.run([tool, '-sass', obj], capture_output=True, text=True, check=True).stdout
    code, cur = {}, None
    for l in sass.splitlines():
        m = re.match(r'\s+Function : (\S+)', l)
        if m:
            cur = m.group(1)
            code[cur] = []
            continue
        m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', l)
        if cur and m:
            code[cur].append((m.group(1), m.group(2)))
    return code


def kernels(tool, obj):
    code = {k: [t for _, t in v] for k, v in sass_code(tool, obj).items()}
    res = subprocess.run([tool, '-res-usage', obj], capture_output=True, text=True, check=True).stdout
    usage, cur = {}, None
    for l in res.splitlines():
        m = re.match(r'\s*Function (\S+):', l)
        if m:
            cur = m.group(1)
            continue
        if cur and 'REG:' in l:
            usage[cur] = dict(re.findall(r'(REG|STACK|SHARED|LOCAL):(\d+)', l))
            cur = None
    return code, usage


def unpredicated(ins):
    return re.sub(r'^@!?U?P\w+\s+', '', ins)


def opcode(ins):
    ins = unpredicated(ins)
    return ins.split()[0] if ins else ''


def main():
    tool, old, new = sys.argv[1:4]
    pat = sys.argv[4] if len(sys.argv) > 4 else ''
    a, ua = kernels(tool, old)
    b, ub = kernels(tool, new)
    if len(sys.argv) > 5:
        r, w = sys.argv[5].split('=>')
        b = {re.sub(r, w, k): v for k, v in b.items()}
        ub = {re.sub(r, w, k): v for k, v in ub.items()}
    differ = 0
    for k in sorted(set(a) | set(b)):
        if pat not in k:
            continue
        if k not in a or k not in b:
            print(f'{"only new" if k in b else "only old"}: {k}')
            differ = 1
            continue
        if a[k] == b[k]:
            print(f'same: {k} ({len(a[k])} instructions)')
            continue
        differ = 1
        r0, r1 = ua.get(k, {}), ub.get(k, {})
        res = ' '.join(f'{f} {r0.get(f)}->{r1.get(f)}' for f in ('REG', 'STACK', 'LOCAL', 'SHARED') if r0.get(f) != r1.get(f))
        c0 = collections.Counter(map(opcode, a[k]))
        c1 = collections.Counter(map(opcode, b[k]))
        ops = ', '.join(f'{o} {c0[o]}->{c1[o]}' for o in sorted(set(c0) | set(c1)) if c0[o] != c1[o])
        # Same opcode sequence: only registers, offsets or constants moved.
        kind = 'operands only' if list(map(opcode, a[k])) == list(map(opcode, b[k])) else 'code'
        print(f'DIFF ({kind}): {k}: {len(a[k])} -> {len(b[k])} instructions {res}'.rstrip())
        if ops:
            print(f'    {ops}')
    sys.exit(differ)


if __name__ == '__main__':
    main()
