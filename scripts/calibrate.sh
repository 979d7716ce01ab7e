#!/usr/bin/env bash
# Regenerates the committed calibration files traces/calib/*.json from the raw files of
# `epref bench calib` (docs/calibration.md), on any CPU machine. Each line names the raw
# directories in the order epsim calibrate reads them (the first that has a file wins; host.json
# is completed from the later ones) and the topology that gives peak, HBM and link figures.
# A DIR holding kernels.json (scripts/torch_kernels.py: the kernels a Megatron step runs, cuDNN
# attention and torch grouped GEMMs) gives the GEMM, grouped GEMM and attention tables instead of
# epref's own kernels: the "-megatron" calibrations, selected per run with --calib NAME.
# usage: [CALIB_DIR=DIR] scripts/calibrate.sh [BUILD_DIR]   (CALIB_DIR: where to write, default
#        traces/calib)
set -euo pipefail
cd "$(dirname "$0")/.."
epsim=${1:-build}/sim/epsim
[ -x "$epsim" ] || { echo "calibrate.sh: $epsim not built" >&2; exit 2; }
out=${CALIB_DIR:-traces/calib}
mkdir -p "$out"
# The deepep / hybridep transport of `epref run` as one kernel (ep_nvl_push, 2026-11-28): its
# nvl_a2a records come first, the NCCL curves of traces/h200x2/calib join them (same machine kind;
# a file's records whose op and ranks are already loaded are left out)
x2_nvl=traces/h200x2/nvl-push-20261128:comm.json
x4_nvl=traces/h200x4/bench-push-20261128/nvl:comm.json
# 2 x H200: everything timed on the two-GPU machine itself: the compute shape grid and the
# validation models' own op shapes timed cold (traces/h200x2/grid-cool-20261128 and
# models-cool-20261128: a hold of 1.5x the op's time before each timing, so no record is taken at
# a power-capped clock), the power cap measured on one H200 (traces/h200/torch/power.json: the
# same GPU; docs/calibration.md, "Sustained load"), host, NCCL, the NVLink transport curve,
# interference, corun
x2_cool=traces/h200x2/grid-cool-20261128
# the power cap of one H200 (the same GPU and epref kernels): the duty table and its release
# (traces/h200/torch/power.json), how fast it trips (power-rise-20261129) and what each op draws
# (four launches of `epref bench calib --parts draw` / `draw-wide`), docs/calibration.md
# "Sustained load" and "What an op draws"
h200_power="traces/h200/torch:power.json traces/h200/torch/power-rise-20261129
  traces/h200/draw-20261129/launch1 traces/h200/draw-20261129/launch2
  traces/h200/draw-wide-20261129/launch1 traces/h200/draw-wide-20261129/launch2"
# interference by the victim's shape (`epref bench calib --parts interference-shapes`, three
# launches, 2026-11-29; equal shapes keep their median): the GEMM, grouped GEMM and attention
# sharing tables
v=traces/h200x2/victims-20261129
x2_victims="$v/launch1 $v/launch2 $v/launch3"
x2_rest="$h200_power $x2_nvl traces/h200x2/calib traces/h200x2/bench $x2_victims"
"$epsim" calibrate $x2_cool $x2_rest \
  --model-shapes traces/h200x2/models-cool-20261128/compute.json.xz --topo h200x2 \
  --out "$out"/h200x2.json
# the same from the grid alone: no model's shapes (docs/validation.md, "Held out")
"$epsim" calibrate $x2_cool $x2_rest --grid-only --topo h200x2 --out "$out"/h200x2-grid.json
# one H200 (`nvidia-h200`): the one-GPU runs of traces/h200/runs and traces/h200/heldout were made
# on that machine, so they are compared with its compute and host costs
# (CALIB=traces/calib/h200.json), taken as for the 2 x H200 file: the shape grid and the one-GPU
# validation models' shapes timed cold on it (2026-11-29; scripts/gpu_calib.sh h200x1 1 with
# PARTS=compute and --iters 5 --warmup 2 --l2-flush 256 times both), the power cap
# of the same GPU, the host costs of traces/h200/calib; NCCL and interference of the two-GPU
# machine fill what one GPU cannot measure
x1_cool=traces/h200/grid-cool-20261129
"$epsim" calibrate $x1_cool $h200_power traces/h200/calib traces/h200/host-20261129 $x2_nvl \
  traces/h200x2/calib traces/h200x2/bench \
  --model-shapes traces/h200/models-cool-20261129/compute.json.xz --topo h200x2 \
  --out "$out"/h200.json
# the same with the compute of the Megatron software stack (traces/h200/torch: torch 2.11, cuDNN
# 9.19 SDPA, torch._grouped_mm, cuBLAS via torch.matmul, FP8 _scaled_mm; 4 x H200, 2026-11-26)
"$epsim" calibrate traces/h200/torch:kernels.json traces/h200/calib traces/h200x4/torch:host_torch.json \
  traces/h100/torch:host_megatron.json $x2_nvl traces/h200x2/calib traces/h200x2/bench --topo h200x2 \
  --out "$out"/h200-megatron.json
# 4 x H200: the deepep / hybridep transport as one kernel at EP 4 (2026-11-28) first, then the NCCL,
# host, interference and corun files of the machine's latest call (traces/h200x4/calib-20261126:
# its host file has the runtime's own costs per op, exec_op / exec_gap, which the 2026-11-22 one in
# traces/h200x4/calib lacks), NCCL over two of its GPUs for groups of two (comm-pairs); the compute
# as the 2 x H200 file has it - the cold shape grid of the same GPU with the power cap - and the
# validation models' GEMM, grouped GEMM and attention shapes timed cold on this machine (traces/h200x4/models-cool-20261128, first of two launches). The memory-bound
# kinds keep what this file read before: the 2 x H200 grid's memory curve and one H200's model
# shapes of 2026-11-25, 5-18% faster below 50 us than every later timing (inputs still in L2, as
# epref's runs meet them; the 2 x H200 file reads flushed ones: docs/validation.md, "Held out")
x4_compute="traces/h200x2/grid-cool-20261128 $h200_power"
x4_rest="$x4_nvl traces/h200x4/calib-20261126 traces/h200x4/comm-pairs traces/h200x4/bench
  --kind-from elementwise:traces/h200x2/grid/compute.json --topo h200x4"
x4_models=traces/h200x4/models-cool-20261128/launch1/compute.json.xz
mem_kinds=elementwise,norm,router,permute,unpermute,loss,optimizer,scan
"$epsim" calibrate $x4_compute $x4_rest --model-shapes gemm,grouped_gemm,attention:$x4_models \
  --model-shapes $mem_kinds:traces/h200/calib/compute.json --out "$out"/h200x4.json
"$epsim" calibrate $x4_compute $x4_rest --grid-only --out "$out"/h200x4-grid.json
# 2 x H100 (the nvidia-h100-x2 kind, 2026-11-27): its own NCCL, host and interference files, the
# compute of one H100 (the same H100 80GB HBM3 part): its shape grid (traces/h100/grid,
# 2026-11-27) with the published models' op shapes (traces/h100/calib, 2026-11-25)
"$epsim" calibrate traces/h100x2/calib traces/h100/grid traces/h100/calib \
  --kind-from attention:traces/h100/grid-attention/compute.json \
  --model-shapes traces/h100/calib/compute.json --topo h100x2 --out "$out"/h100x2.json
# 4 x H100 (the nvidia-h100-x4 kind, 2026-11-27): the same with its own NCCL, host and interference;
# groups of two take the 2 x H100 machine's NCCL curves (two ranks of a 4 x H200 machine time as the
# 2 x H200 machine does, within 2%: docs/calibration.md, "NCCL curves by group size")
"$epsim" calibrate traces/h100x4/calib traces/h100x2/calib:comm.json traces/h100/grid traces/h100/calib \
  --kind-from attention:traces/h100/grid-attention/compute.json \
  --model-shapes traces/h100/calib/compute.json --topo h100x4 --out "$out"/h100x4.json
# DGX H100 topologies: one H100's compute and host costs; NCCL over NVLink (curves), the NVLink
# transport, NCCL's launch and how compute and NCCL slow each other from the 4 x H100 machine (the
# most ranks of H100 measured: a DGX's all-to-alls span 8 or more); the interference records no
# H100 machine has - compute beside an NCCL all-to-all that waits for a late peer, and beside
# copy-engine peer copies (TE userbuffers' all-gather) - from 2 x H200 (same Hopper SMs, NCCL and
# copy engines; epsim calibrate completes a file with the aggressors it lacks); groups of two take
# the 2 x H100 machine's NCCL curves
h100_comm="traces/h100x4/calib:comm.json,interference.json,host.json traces/h100x2/calib:comm.json
  traces/h200x2/calib:interference.json"
"$epsim" calibrate traces/h100/grid traces/h100/calib $h100_comm \
  --kind-from attention:traces/h100/grid-attention/compute.json \
  --model-shapes traces/h100/calib/compute.json --topo dgx8 --out "$out"/h100.json
# the same with the compute of the Megatron software stack, timed cold on one H100
# (traces/h100/torch-cool: every timing after a hold of 1.5x the op's time, 2026-11-27), its host
# costs there: Megatron-Core's own layers (scripts/megatron_host.py: the bookkeeping per op, per
# expert call), a CUDA graph's replay and torch.distributed's NCCL call (scripts/torch_host.py),
# and the power cap (traces/h100/torch/power.json); Megatron's step outside the layers
# (scripts/megatron_step_host.py on one H200's host, scaled to the H100 host by the dense layer
# timed in the same rounds). Its expert GEMMs are timed as Transformer
# Engine's GroupedLinear runs them on Hopper: one cuBLAS GEMM per expert on four streams (bf16:
# traces/h100/torch-multistream; FP8 with tensorwise scales: traces/h100/torch-fp8-multistream),
# not as torch's grouped kernel. Only this file has the power model: the other
# calibrations' compute records were timed partly at a capped clock (docs/calibration.md,
# "Sustained load"), so they leave power.json out
"$epsim" calibrate traces/h100/torch-cool traces/h100/torch traces/h100/grid traces/h100/calib \
  $h100_comm traces/h200/torch:step_megatron.json --model-shapes traces/h100/calib/compute.json \
  --kind-from grouped_gemm/bf16:traces/h100/torch-multistream/kernels.json.xz \
  --kind-from grouped_gemm/fp8:traces/h100/torch-fp8-multistream/kernels.json \
  --topo dgx8 --out "$out"/h100-megatron.json
