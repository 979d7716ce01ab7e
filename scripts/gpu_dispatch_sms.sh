#!/usr/bin/env bash
# How the fused NVLink dispatch (dispatch + permute in one kernel) splits its SMs: `epref bench
# dispatch` at EP = NPROC over sender counts (--num-sms) and permute-block counts
# (--permute-blocks), one launch per pair, the issue-25 model (hidden 7168, top-8 of 256, bf16).
#   OUT=dir EPREF=path [NPROC=2] [SENDERS="16 24 32"] [PERMUTE="32 64 ALL"] [TOKENS=4096,16384]
#   bash scripts/gpu_dispatch_sms.sh
# ALL: every SM the senders leave (SMS - senders; SMS default 132, an H100 SXM's or H200's).
# Writes $OUT/dispatch_sms.txt (every launch's table, headed by its pair) and
# $OUT/s<senders>_p<blocks>.json.
set -u -o pipefail
. scripts/gpu_epref.sh
export NCCL_NVLS_ENABLE=0
OUT=${OUT:?OUT}
EPREF=${EPREF:?EPREF}
NPROC=${NPROC:-2}
mkdir -p "$OUT"
sms=${SMS:-132} # H100 SXM and H200: 132 SMs
for s in ${SENDERS:-16 24 32}; do
  for p in ${PERMUTE:-32 64 ALL}; do
    [ "$p" = ALL ] && p=$((sms - s))
    echo "== senders $s permute $p" >> "$OUT/dispatch_sms.txt"
    timeout 120 "$EPREF" --nproc "$NPROC" bench dispatch $(bench_model "$NPROC") \
      $(bench_run_flags "$s" "$p") --tokens "${TOKENS:-4096,16384}" \
      --json "$OUT/s${s}_p${p}.json" >> "$OUT/dispatch_sms.txt" 2>&1
    echo "senders $s permute $p rc=$?"
  done
done
