# ncu_agg.py: an Nsight Compute source CSV (`ncu -i R --page source --csv --print-source cuda,sass`,
# as dev/gpu-session/ncuout.sh and pfncu.sh export it) aggregated per CUDA source line: stall samples,
# instructions, top stall reasons. Usage: python3 dev/tools/ncu_agg.py FILE.csv [N]
import csv, sys, collections
f = sys.argv[1]; N = int(sys.argv[2]) if len(sys.argv) > 2 else 25
rows = list(csv.reader(open(f)))
cur_file = None; hdr = None
agg = collections.defaultdict(lambda: collections.Counter())
src = {}
tot = collections.Counter()
for r in rows:
    if len(r) == 2 and r[0] == 'File Path': cur_file = r[1].split('/')[-1]; continue
    if r and r[0] == 'Line No': hdr = r; continue
    if not hdr or len(r) < len(hdr) or not r[0].isdigit(): continue
    key = (cur_file, int(r[0])); src[key] = r[1][:90]
    def num(i):
        try: return float(r[i])
        except: return 0.0
    agg[key]['samples'] += num(4); agg[key]['inst'] += num(7)
    for i in range(34, 52):
        agg[key][hdr[i]] += num(i); tot[hdr[i]] += num(i)
    tot['samples'] += num(4)
print('total samples', tot['samples'], 'by reason:', ', '.join('%s %.0f%%' % (k[6:], 100*v/max(1,tot['samples'])) for k, v in tot.most_common() if k.startswith('stall') and v > 0.02*tot['samples']))
for key, c in sorted(agg.items(), key=lambda kv: -kv[1]['samples'])[:N]:
    top = sorted(((v, k) for k, v in c.items() if k.startswith('stall')), reverse=True)[:3]
    print('%5.1f%% %6.0f inst  %s:%d  %s | %s' % (100*c['samples']/max(1,tot['samples']), c['inst'], key[0], key[1], src[key].strip(), ' '.join('%s %.0f' % (k[6:], v) for v, k in top)))
