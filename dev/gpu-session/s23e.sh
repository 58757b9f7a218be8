#!/usr/bin/env bash
# s23e.sh (device, ~2 min; branch s23-issue 4f7c54f, run in call 6 with main bb5af58 as the base): gdn_scan_wg with Q S0 and M Delta issued whole (one wait
# each) and the next record's copies issued under the state update's MMAs: its GDN tests and the GDN
# timing table against main's build (carried as .carry/gt_main.xz), alternating.
. .carry/common.sh; safe_start 200
xz -dc $C/gt_main.xz > /tmp/gt_main && chmod +x /tmp/gt_main
gdn_tables main /tmp/gt_main issue $B/lily-gpu-test
grep -E "FAIL" $L/gdn_issue1.txt $L/gdn_issue2.txt | head -5
safe_end
