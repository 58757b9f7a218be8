#!/usr/bin/env bash
# s15e.sh (device, ~3 min; fifteenth session, fifth call): the chunked GDN with every phase-B operand
# stored in the order its MMA fragments are loaded (the state split once, (fk Delta)^T split once, W, M
# and U written by phase A in fragment order). GDN prefill tests and timing table, racecheck / memcheck
# of them, e2e and fixtures, full-size logits against the base (at the noise floor, s15c), pfprof 4K,
# prefill of the base and this build alternating: s15b.sh's checks on this build.
bash .carry/s15b.sh
