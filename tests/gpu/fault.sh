#!/usr/bin/env bash
# fault.sh EPREF: a rank that dies or never arrives ends the whole `epref --nproc 2 run` with an
# error naming the rank (and, for the one that never arrives, the op the others waited on), within
# a stated time, and leaves no process behind (docs/epref-run.md, "Faults"). Needs 2 GPUs (exit 77).
#   A: kill -9 rank 1 mid-run: the launcher reports "rank 1 was killed by signal 9" and stops rank 0.
#   B: EPREF_STALL=1:<a dispatch op> keeps rank 1 from launching it; with EPREF_OP_TIMEOUT=10,
#      rank 0 names the op it waited on (rank 1's watchdog sees its own host held), the first to
#      exit ends the job.
set -u -o pipefail
set -f # the model flags hold glob characters
epref=${1:?usage: fault.sh EPREF}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpu" -ge 2 ] || { echo "fault: needs 2 GPUs, found $ngpu: skipped"; exit 77; }
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)
  --seq-length 2048 --micro-batch-size 1 --global-batch-size 8 --world-size 2
  --expert-model-parallel-size 2 --warmup 1"
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
# processes of one case: their argv carries the case's own --summary-json path
left() { pgrep -f "$tmp/$1.json" | grep -vx "$$" | wc -l; }

# A: kill -9 one rank mid-run
"$epref" --nproc 2 run $model --iters 200 --summary-json "$tmp/a.json" > "$tmp/a.out" 2> "$tmp/a.err" &
launcher=$!
for _ in $(seq 120); do grep -q "epref run:" "$tmp/a.out" && break; sleep 0.5; done
sleep 5 # well into the iterations
victim=$(pgrep -P $launcher | sort -n | sed -n 2p) # forked in rank order: the second is rank 1
check "A: found rank 1 (launcher $launcher)" '[ -n "$victim" ]'
t0=$(date +%s)
kill -9 "$victim"
timeout 60 tail --pid=$launcher -f /dev/null
wait $launcher
rc=$?
dt=$(($(date +%s) - t0))
cat "$tmp/a.err"
check "A: exit status not 0 ($rc)" '[ $rc -ne 0 ]'
check "A: ended within 30 s of the kill (${dt} s)" '[ $dt -le 30 ]'
check "A: names rank 1" 'grep -q "rank 1 was killed by signal 9" "$tmp/a.err"'
check "A: no process left" '[ "$(left a)" -eq 0 ]'
check "A: no summary written" '[ ! -e "$tmp/a.json" ]'

# B: rank 1 never reaches a dispatch
t0=$(date +%s)
EPREF_OP_TIMEOUT=10 EPREF_STALL="1:mb0.c0.L1.dispatch.fwd" timeout 120 \
  "$epref" --nproc 2 run $model --iters 2 --summary-json "$tmp/b.json" > "$tmp/b.out" 2> "$tmp/b.err"
rc=$?
dt=$(($(date +%s) - t0))
cat "$tmp/b.err"
check "B: exit status not 0 or 124 ($rc)" '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
check "B: ended within 60 s (${dt} s)" '[ $dt -le 60 ]'
check "B: rank 0 names the op it waited on" 'grep -q "rank 0: no op finished for 10 s; waiting on mb0.c0.L1.dispatch.fwd" "$tmp/b.err"'
# rank 1's own watchdog may fire first (its host is held): either way one rank ends the job
check "B: the launcher stops the other rank" 'grep -qE "rank [01] failed \(exit status 1\); stopping the other ranks" "$tmp/b.err"'
check "B: no process left" '[ "$(left b)" -eq 0 ]'
exit $fail
