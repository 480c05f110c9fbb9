#!/usr/bin/env bash
# The GPU checks of issues 30 and 31, in one command on a machine with a CUDA GPU and this project's packages
# (torch, Lightning, pyarrow, scipy, rich, nvidia-ml-py) importable by $PYTHON:
#
#   benchmarks/gpu_check.sh [OUT_DIR] [--against CPU_AUDIT_DIR]
#
# Each step is bounded by a timeout and writes its log to OUT_DIR (default gpu-check/); a failing step does not
# stop the next ones, and the summary at the end lists every step's exit status. Steps:
#   tests     tests/gpu (no sync per step, determinism switches, control bit-identical, impl varies, fingerprint)
#             and the CUDA step-timing tests
#   overhead  benchmarks/callback_overhead.py --parts gpu: throughput with/without the callback, two shapes
#   replicate examples/cuda_cnn.py x3 replicas under control and impl, then `deviate report`
#   audit     `deviate audit` of the example under impl (names the module where runs part), optionally
#             --against a recording made on a CPU machine (the fingerprint diff)
#   bench     `deviate bench --device cuda --model small_cnn`: the cost of determinism with its interval
#   audit-cost benchmarks/audit_overhead.py --device cuda
set -u
OUT=gpu-check
AGAINST=
while [ $# -gt 0 ]; do
  case $1 in
    --against) AGAINST=$2; shift 2 ;;
    *) OUT=$1; shift ;;
  esac
done
PY=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
mkdir -p "$OUT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
SUMMARY=()

step() {  # step NAME SECONDS COMMAND...: run, log to $OUT/NAME.log, remember the exit status
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$OUT/$name.log"
  SUMMARY+=("$name: exit $rc")
  echo "== $name: exit $rc"
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  "$PY" -c 'import torch, lightning; print("torch", torch.__version__, "cuda", torch.version.cuda,
"cudnn", torch.backends.cudnn.version(), "lightning", lightning.__version__)'; } 2>&1 | tee "$OUT/machine.txt"

step tests 240 "$PY" -m pytest tests/gpu tests/lightning_cb/test_cuda_steps.py tests/timing/test_step_timer.py \
  -p no:cacheprovider -q -rs -s
step overhead 240 "$PY" benchmarks/callback_overhead.py --parts gpu --pairs 9
rm -rf "$OUT/runs"
step replicate 240 bash -c "
  $PY -m deviate_cb.cli.replicate --trainer examples/cuda_cnn.py:main -n 3 --variant control --parallel 3 \
    --out $OUT/runs --experiment cnn &&
  $PY -m deviate_cb.cli.replicate --trainer examples/cuda_cnn.py:main -n 3 --variant impl --parallel 3 \
    --out $OUT/runs --experiment cnn &&
  $PY -m deviate_cb.cli.main report $OUT/runs"
step audit 180 "$PY" -m deviate_cb.cli.main audit --trainer examples/cuda_cnn.py:main --variant impl --steps 5 \
  --out "$OUT/audit"
if [ -n "$AGAINST" ]; then
  step audit-against 180 "$PY" -m deviate_cb.cli.main audit --trainer examples/cuda_cnn.py:main --steps 5 \
    --out "$OUT/audit-control" --against "$AGAINST"
fi
step bench 240 "$PY" -m deviate_cb.cli.main bench --device cuda --model small_cnn --windows 4
step audit-cost 180 "$PY" benchmarks/audit_overhead.py --device cuda --rounds 3

echo "== summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
