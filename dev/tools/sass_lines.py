# sass_lines.py: SASS instruction counts of one kernel per CUDA source line (dev/tools/sass.sh lines OBJ KERNEL
# fetches the tools and runs cuobjdump -xelf and nvdisasm --print-line-info for it).
# Usage: python3 dev/tools/sass_lines.py X.sass MANGLED-KERNEL-SUBSTRING [N]
import re,collections,sys
cur=None; line=None; cnt=collections.Counter()
pat=sys.argv[2]; n=int(sys.argv[3]) if len(sys.argv)>3 else 30
for l in open(sys.argv[1]):
    m=re.match(r'\s*\.text\.(\S+):',l)
    if m: cur=m.group(1); continue
    m=re.search(r'//## File "([^"]+)", line (\d+)',l)
    if m: line=(m.group(1).split('/')[-1],int(m.group(2))); continue
    if cur and pat in cur and re.match(r'\s+/\*[0-9a-f]{4,}\*/',l): cnt[line]+=1
print('total',sum(cnt.values()))
byf=collections.Counter()
for (f,k),c in cnt.items(): byf[f]+=c
print(byf.most_common())
for k,c in cnt.most_common(n): print(c,k)
