#!/bin/bash
# One call on a lent GPU machine (the device tool runs it in a copy of the working tree), in order of priority:
# the timings that need the GPU to themselves (bench_engine.py's replica ratios, then bench_recall.py, whose
# --full-run trains the full Fig. 3 run alone), then, sharing the GPU, the device tests beside the precision
# comparison and the named recordings in parallel queues, then `record --all` (every experiment of the sources not
# yet recorded). Every step is bounded so that the call ends by $DEADLINE seconds; the files land in $OUT (the
# benchmarks' under bench/), packed into one archive. Each step can be turned off (ENGINE=0, BENCH=0, SAMPLERS=0,
# CUDA_TESTS=0, COMPARE=0, ALL=0); the last, the book executed under nbval (BOOK=1), is off unless turned on.
# Resumable: a recording already committed is not made again (data/recorded/, or the folder of the sampler in
# force, data/recorded/counter/, where the archive's recordings are committed).
# The third-party data (../shared/data) does not travel by itself: copy it into .data/ (ignored by git) and name
# .data in the call's carry; COMPANION_DATA_DIR points there.
# Used on 2026-11-26: COMPANION_COMMIT=<commit sent> DEADLINE=530 bash benchmarks/gpu_session.sh
# Used on 2026-11-27 (H200; the call took 372 s): COMPANION_COMMIT=<commit sent> DEADLINE=560 ENGINE_S=90 BENCH=0 \
#   ALL=0 COMPARE_QUEUES=seed TEST_ARGS="--timeout 100" \
#   QUEUES="recall:lr=0.001,recall:lr=0.003 recall:lr=0.01,recall:lr=0.03" bash benchmarks/gpu_session.sh
# then, on the same warm machine, ENGINE=0 COMPARE=0 CUDA_TESTS=0 ALL=0 QUEUES=<the public code's choices at seeds
# 0-2, one queue each> (177 s). TEST_ARGS is split at spaces: a -k expression with spaces does not pass.
# CPU rehearsal with tiny settings: DEV=cpu PROFILE=quick EXTRA="--set steps=4 --set eval_every=2" OUT=/tmp/o ...
# (2026-12-07: DEADLINE=240 ENGINE_S=60 BENCH=0 SAMPLERS=0, and TEST_ARGS="-x" where pytest-timeout is missing, as in
# the book's environment; the GPU image has it: every step ran, record --all recorded three quick experiments.)
# Issue 54 item 4, quick recordings made again under the counter sampler (not yet tried on a GPU):
# COMPANION_SAMPLER=counter PROFILE=quick ENGINE=0 BENCH=0 SAMPLERS=0 CUDA_TESTS=0 COMPARE=0 ALL=0 QUEUES="..."
# with items NAME:key=value:... as the committed files' commands give them, each level committed into
# data/recorded/counter/ before a recording that reads it (a recording stores what it read, "reads"). Every quick
# one is made (on two CPU threads; the two recall d256 ones on 2026-12-05, 46 and 50 min of training); the full
# files still missing (a GPU's) are listed by
# python -c "from companion import record_reads; print(*(r.path.name for r in record_reads.waiting_under('counter')))"
# (the stall chapter's studies are kept as made, not waiting: record_reads.kept_under, khop_stall.study_sampler).
# Issue 56, the book executed at full (a lease of its own; not yet run on a GPU): here, python benchmarks/gpu_wheels.py
# --dest .whl and cp -rL ../shared/data .data (both ignored by git), then with carry [".whl", ".data"]:
# COMPANION_COMMIT=<commit sent> DEADLINE=560 ENGINE=0 BENCH=0 SAMPLERS=0 CUDA_TESTS=0 COMPARE=0 ALL=0 BOOK=1 \
#   BOOK_ARGS="--chapter-timeout 300" bash benchmarks/gpu_session.sh
# then unpack the archive and commit its book/full.json as data/recorded/book/full.json (the next call resumes it).
set -u
T0=$(date +%s); DEADLINE=${DEADLINE:-530}
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 COMPANION_CACHE_DIR=${COMPANION_CACHE_DIR:-/tmp/cc} HF_HUB_OFFLINE=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} MKL_NUM_THREADS=${OMP_NUM_THREADS:-2}
[ -d .data ] && export COMPANION_DATA_DIR=${COMPANION_DATA_DIR:-$PWD/.data}
PY=${PY:-python3}; DEV=${DEV:-cuda}; PROFILE=${PROFILE:-full}; EXTRA=${EXTRA:-}
OUTD=${OUT:-/tmp/out}; mkdir -p "$OUTD" /tmp/logs; rm -f /tmp/logs/*.log
# The benchmarks' files go to $OUTD/bench, those written by this call only: the top level of $OUTD holds the
# recordings, which `record --all` (step 4) reads back as recordings (a benchmark file there stopped it at once, exit
# 2, in a CPU rehearsal on 2026-12-07: "recorded format None").
BENCHD="$OUTD/bench"; SINCE=$(mktemp); mkdir -p "$BENCHD"
keep_bench() { find benchmarks/results -maxdepth 1 -name "$1" -newer "$SINCE" -exec cp {} "$BENCHD/" \; ; }
nvidia-smi -L 2>/dev/null; $PY -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
echo "commit ${COMPANION_COMMIT:-unset} data ${COMPANION_DATA_DIR:-none}"
# 1. Alone on the GPU: replicas against the same runs one after another (fact_capacity's quick grid, allocation,
# k-hop; 64 steps each). The file is written after each family, so a stop at the bound keeps what was measured.
ENGINE=${ENGINE:-1}
if [ "$ENGINE" = 1 ]; then
  timeout ${ENGINE_S:-100} $PY benchmarks/bench_engine.py --device $DEV ${ENGINE_ARGS:-} > /tmp/logs/bench_engine.log 2>&1
  echo "bench_engine rc=$? at $(( $(date +%s) - T0 )) s"; grep replica_ratio /tmp/logs/bench_engine.log
  keep_bench "*-engine.json"
fi
# 2. Alone on the GPU: the core experiment's building blocks and the full Fig. 3 run (--full-run).
BENCH=${BENCH:-1}
if [ "$BENCH" = 1 ]; then
  timeout $(( $(left) - 240 )) $PY benchmarks/bench_recall.py --device $DEV --full-run > /tmp/logs/bench.log 2>&1
  echo "bench rc=$? at $(( $(date +%s) - T0 )) s"; tail -c 1500 /tmp/logs/bench.log | tr '\r' '\n' | tail -25
  keep_bench "*.json"
fi
# 2b. Alone on the GPU: the counter-based samplers' data rate against the numpy generators' (issue 54; seconds).
SAMPLERS=${SAMPLERS:-1}
if [ "$SAMPLERS" = 1 ]; then
  timeout 90 $PY benchmarks/bench_samplers.py --device $DEV > /tmp/logs/bench_samplers.log 2>&1
  echo "bench_samplers rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "^(recall|bigram)" /tmp/logs/bench_samplers.log
  keep_bench "*-samplers.json"
fi
rm -f "$BENCHD"/CPU_* "$BENCHD"/llm_*
# 3. Sharing the GPU. The device checks (tests/test_cuda.py: one full-configuration step of every recordable, each
# test bounded by pytest-timeout), beside the recordings, until the deadline: pytest writes why a test failed only
# at its end, so a bound shorter than the recordings' loses the reasons (on 2026-11-27, 240 s lost leading_bpe's).
CUDA_TESTS=${CUDA_TESTS:-1}
if [ "$CUDA_TESTS" = 1 ]; then
  ( timeout $(( $(left) - 20 )) $PY -m pytest -rA -v -p no:cacheprovider \
      -o addopts="" ${TEST_ARGS:---timeout 150} tests/test_cuda.py > "$OUTD/cuda_tests.log" 2>&1
    echo "cuda tests rc=$? at $(( $(date +%s) - T0 )) s"; tail -5 "$OUTD/cuda_tests.log" ) &
fi
rec() {  # rec ITEM...: record each in turn, bounded by the deadline; an ITEM is NAME or NAME:KEY=VALUE:KEY=VALUE
  for item in "$@"; do
    IFS=: read -r -a parts <<< "$item"; sets=()
    for kv in "${parts[@]:1}"; do sets+=(--set "$kv"); done
    log=/tmp/logs/$(echo "$item" | tr ':=' '__').log
    timeout $(( $(left) - 15 )) $PY -m companion record ${parts[0]} --profile $PROFILE "${sets[@]}" $EXTRA \
      --device $DEV --out-dir "$OUTD" > $log 2>&1
    echo "record $item rc=$? at $(( $(date +%s) - T0 )) s"
  done
}
# The precision comparison (issue 51, item 5): the Fig. 3 run at seeds 0-2 in TF32 and at seeds 1-2 in fp32 (seed 0
# in fp32 is data/recorded/recall-full.json); each file says its precision and seed. COMPARE_QUEUES=precision: one
# queue per precision; seed: one queue per run.
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
  if [ "${COMPARE_QUEUES:-precision}" = seed ]; then
    for s in 0 1 2; do compare tf32 $s & done; for s in 1 2; do compare fp32 $s & done
  else
    compare tf32 0 1 2 & compare fp32 1 2 &
  fi
fi
# Named recordings (e.g. QUEUES="khop_seeds,khop_wide recall:lr=0.01"; space: parallel queues, comma: one after
# another); none by default. 2026-11-26 used QUEUES="recall,triggers architectures finetune" (now recorded).
QUEUES=${QUEUES-}
for q in $QUEUES; do rec ${q//,/ } & done
wait
# 4. Then every experiment of the sources not yet recorded at this profile, one after another, until the deadline
# (python -m companion record --all; INCLUDE="--include khop_seeds ..." adds our studies).
ALL=${ALL:-1}
if [ "$ALL" = 1 ] && [ "$(left)" -gt 30 ]; then
  $PY -m companion record --all --profile $PROFILE --device $DEV --out-dir "$OUTD" --deadline $(( $(left) - 15 )) \
    ${INCLUDE:-} > /tmp/logs/all.log 2>&1
  echo "record --all rc=$? at $(( $(date +%s) - T0 )) s"; grep "^|" /tmp/logs/all.log; cp /tmp/logs/all.log "$OUTD/"
fi
# 5. The book executed at $PROFILE under nbval, chapter after chapter until the deadline (issue 56; BOOK=1, off by
# default: it wants a lease of its own). The wheels the machine lacks (python benchmarks/gpu_wheels.py --dest .whl)
# travel in .whl (name it in carry). The record starts from the committed data/recorded/book/$PROFILE.json (a chapter
# recorded there is not run again) and comes back in the archive as book/$PROFILE.json, to be committed there.
# BOOK_ARGS passes scripts/book_run.py's options, e.g. "--chapter-timeout 240" or chapters by name.
BOOK=${BOOK:-0}
if [ "$BOOK" = 1 ] && [ "$(left)" -gt 60 ]; then
  if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      > /tmp/logs/wheels.log 2>&1 && export PYTHONPATH=$PYTHONPATH:/tmp/site
  fi
  mkdir -p "$OUTD/book"; cp "data/recorded/book/$PROFILE.json" "$OUTD/book/" 2>/dev/null
  $PY scripts/book_run.py --profile $PROFILE --deadline $(( $(left) - 20 )) --out "$OUTD/book/$PROFILE.json" \
    ${BOOK_ARGS:-} > /tmp/logs/book_run.log 2>&1
  echo "book run rc=$? at $(( $(date +%s) - T0 )) s"; tail -40 /tmp/logs/book_run.log
fi
for f in /tmp/logs/*.log; do echo "== $f"; tr '\r' '\n' < $f | grep -v "^\s*$" | tail -6; done
ls -la "$OUTD"; echo "total $(( $(date +%s) - T0 )) s"
# The device tool brings back at most 8 files: everything in one archive (unpack it here with tar xzf).
PACK=${PACK:-1}
if [ "$PACK" = 1 ]; then
  mkdir -p "$OUTD/logs" && cp /tmp/logs/*.log "$OUTD/logs/" 2>/dev/null
  tar czf /tmp/gpu_session.tar.gz -C "$OUTD" . && find "$OUTD" -mindepth 1 -delete && mv /tmp/gpu_session.tar.gz "$OUTD/"
fi
