#!/bin/bash
# One call on a lent GPU machine (the device tool runs it in a copy of the working tree), in order of priority:
# the device tests, the precision comparison, the benchmark alone (its --full-run trains and caches the full
# Fig. 3 run), named recordings in parallel queues on the same GPU, then `record --all` (every experiment of the
# sources not yet recorded). Every step is bounded so that the call ends by $DEADLINE seconds; the files land in
# $OUT. Each step can be turned off (CUDA_TESTS=0, COMPARE=0, BENCH=0, ALL=0).
# Used on 2026-11-26: COMPANION_COMMIT=<commit sent> DEADLINE=530 bash benchmarks/gpu_session.sh
set -u
T0=$(date +%s); DEADLINE=${DEADLINE:-530}
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 COMPANION_CACHE_DIR=/tmp/cc OMP_NUM_THREADS=4 MKL_NUM_THREADS=4
PY=${PY:-python3}; DEV=${DEV:-cuda}; PROFILE=${PROFILE:-full}; EXTRA=${EXTRA:-}
OUTD=${OUT:-/tmp/out}; mkdir -p "$OUTD" /tmp/logs; rm -f /tmp/logs/*.log
nvidia-smi -L 2>/dev/null; $PY -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
echo "commit $COMPANION_COMMIT"
# First the device checks (tests/test_cuda.py, seconds on a GPU; skipped where there is no CUDA): a device error
# shows here, not minutes into a recording.
CUDA_TESTS=${CUDA_TESTS:-1}
if [ "$CUDA_TESTS" = 1 ]; then
  timeout $(( $(left) < 240 ? $(left) / 2 : 180 )) $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py \
    > "$OUTD/cuda_tests.log" 2>&1
  echo "cuda tests rc=$? at $(( $(date +%s) - T0 )) s"; tail -5 "$OUTD/cuda_tests.log"
fi
# The precision comparison (issue 51, item 5): the Fig. 3 run at seeds 0-2 in TF32 and at seeds 1-2 in fp32 (seed 0
# in fp32 is data/recorded/recall-full.json), two parallel queues; each file says its precision and seed.
COMPARE=${COMPARE:-1}
compare() {  # compare PRECISION SEED...: each run not yet committed under data/recorded (resumable)
  for s in "${@:2}"; do
    seed=$([ "$s" = 0 ] || echo "--set seed=$s")
    f="recall-$PROFILE$([ "$1" = fp32 ] || echo "-$1")$([ "$s" = 0 ] || echo "-seed=$s").json"
    if [ -z "$EXTRA" ] && [ -f "data/recorded/$f" ]; then echo "recall $1 seed $s: recorded ($f)"; continue; fi
    timeout $(( $(left) - 15 )) $PY -m companion record recall --profile $PROFILE $seed $EXTRA --precision $1 \
      --device $DEV --out-dir "$OUTD" > /tmp/logs/compare-$1-$s.log 2>&1
    echo "record recall $1 seed $s rc=$? at $(( $(date +%s) - T0 )) s"
  done
}
if [ "$COMPARE" = 1 ]; then
  compare tf32 0 1 2 & compare fp32 1 2 & wait
fi
BENCH=${BENCH:-1}
if [ "$BENCH" = 1 ]; then
  timeout $(( $(left) - 240 )) $PY benchmarks/bench_recall.py --device $DEV --full-run > /tmp/logs/bench.log 2>&1
  echo "bench rc=$? at $(( $(date +%s) - T0 )) s"; tail -c 1500 /tmp/logs/bench.log | tr '\r' '\n' | tail -25
  # replicas against the same runs one after another (fact_capacity's quick grid, 64 steps each)
  timeout $(( $(left) < 300 ? 30 : 120 )) $PY benchmarks/bench_engine.py --device $DEV > /tmp/logs/bench_engine.log 2>&1
  echo "bench_engine rc=$? at $(( $(date +%s) - T0 )) s"; grep replica_ratio /tmp/logs/bench_engine.log
  cp benchmarks/results/*.json "$OUTD/" 2>/dev/null
  rm -f "$OUTD"/CPU_* "$OUTD"/llm_*
fi
rec() {  # rec NAME...: record each in turn, bounded by the deadline
  for n in "$@"; do
    timeout $(( $(left) - 15 )) $PY -m companion record $n --profile $PROFILE $EXTRA --device $DEV --out-dir "$OUTD" \
      > /tmp/logs/$n.log 2>&1
    echo "record $n rc=$? at $(( $(date +%s) - T0 )) s"
  done
}
# Named recordings (e.g. QUEUES="khop_seeds,khop_wide khop_lr"; space: parallel queues, comma: one after another);
# none by default. 2026-11-26 used QUEUES="recall,triggers architectures finetune" (now recorded).
QUEUES=${QUEUES-}
for q in $QUEUES; do rec ${q//,/ } & done
wait
# Then every experiment of the sources not yet recorded at this profile, one after another, until the deadline
# (python -m companion record --all; INCLUDE="--include khop_seeds ..." adds our studies).
ALL=${ALL:-1}
if [ "$ALL" = 1 ] && [ "$(left)" -gt 30 ]; then
  $PY -m companion record --all --profile $PROFILE --device $DEV --out-dir "$OUTD" --deadline $(( $(left) - 15 )) \
    ${INCLUDE:-} > /tmp/logs/all.log 2>&1
  echo "record --all rc=$? at $(( $(date +%s) - T0 )) s"; grep "^|" /tmp/logs/all.log; cp /tmp/logs/all.log "$OUTD/"
fi
for f in /tmp/logs/*.log; do echo "== $f"; tr '\r' '\n' < $f | grep -v "^\s*$" | tail -6; done
ls -la "$OUTD"; echo "total $(( $(date +%s) - T0 )) s"
# The device tool brings back at most 8 files: everything in one archive (unpack it here with tar xzf).
PACK=${PACK:-1}
if [ "$PACK" = 1 ]; then
  mkdir -p "$OUTD/logs" && cp /tmp/logs/*.log "$OUTD/logs/" 2>/dev/null
  tar czf /tmp/gpu_session.tar.gz -C "$OUTD" . && find "$OUTD" -mindepth 1 -delete && mv /tmp/gpu_session.tar.gz "$OUTD/"
fi
