#!/bin/bash
# The measurements of this study, one after another on a quiet machine (about 45 minutes on the
# 2-core VM), from the repository root's build (SELFSPEC_BUILD_DIR, default build; after
# scripts/build.sh). Models from scripts/get-model.sh, HumanEval from scripts/get-prompts.sh.
# Everything is written to STUDY_OUT (default out/studies/2026-11-27-native-kernels), with the
# tables (tables.md) and plots (plots/) of tables.py and plot.py.
#   docs/results/2026-11-27-native-kernels/run.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
B=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin
R=${STUDY_OUT:-out/studies/2026-11-27-native-kernels}
mkdir -p "$R"/{bench,kernels,accuracy,skip-bench}
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)
S=$(scripts/get-model.sh smollm2-135m-instruct)
H=$(scripts/get-prompts.sh humaneval)
log() { echo "$(date +%H:%M:%S) $*" >> $R/study.log; }
log "start; load $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. llama.cpp side by side on the same GGUF, 1 and 2 threads, 3 interleaved rounds.
scripts/dev/llama_cpp_side_by_side.sh "$Q" $R/side-by-side/qwen2.5-coder-1.5b --rounds 3
scripts/dev/llama_cpp_side_by_side.sh "$S" $R/side-by-side/smollm2-135m --rounds 3

# 2. selfspec bench: decode against the run's own stream bandwidth, v(gamma) for gamma = 1..8.
for t in 1 2; do
  for d in native bf16; do
    for m in qwen:$Q smollm2:$S; do
      $B/selfspec bench --model "${m#*:}" --prompt-len 64 --gen 128 --reps 3 --threads $t \
        --weights-dtype $d --verify-cost-rounds 5 --out $R/bench/${m%%:*}-$d-t$t.json
    done
  done
done

# 3. The kernels per format and token count (3 GB pool so the stream is not cached).
for t in 1 2; do
  $B/packed_matmul_bench --threads $t --reps 5 --pool-mb 3000 \
    --tokens 1,2,3,4,5,6,7,8,9,12,16,64 --json $R/kernels/packed-t$t.json
done

# 4. Accuracy of native and bf16 weights against the file's values in f32.
for d in native bf16; do
  for m in qwen:$Q:qwen2.5-coder-1.5b-instruct smollm2:$S:smollm2-135m-instruct; do
    IFS=: read -r tag file ref <<< "$m"
    $B/selfspec compare-weights --model "$file" --weights-dtype $d \
      --ids-json tests/data/realmodel/$ref.json --text-file /usr/share/common-licenses/GPL-3 \
      --window 256 --max-windows 8 --json --out $R/accuracy/$tag-$d.json
  done
done

# 5. Issue 10's Qwen skip-set evaluation (same searched set, same 4 HumanEval evaluation
#    prompts, 48 tokens, 1 thread), native and bf16 weights.
for d in native bf16; do
  for ctl in "adaptive" "fixed --max-draft 1" "fixed --max-draft 2" "fixed --max-draft 3"; do
    tag=$(echo "$ctl" | sed 's/ --max-draft /-k/')
    $B/selfspec bench --config configs/studies/2026-11-25-skip-choosers-qwen.yaml --model "$Q" \
      --prompts-file $H --weights-dtype $d --controller $ctl \
      --out $R/skip-bench/bench-bo-$d-$tag.json
  done
done
log "end; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/tables.py" "$R" > "$R/tables.md"
python3 "$here/plot.py" "$R"
