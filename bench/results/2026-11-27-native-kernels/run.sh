#!/bin/bash
# The measurements of this study, one after another on a quiet machine (run from the repository
# root after scripts/build.sh; about 45 minutes on the 2-core VM). Models from
# scripts/get-model.sh, HumanEval from scripts/get-prompts.sh humaneval.
set -u
R=bench/results/2026-11-27-native-kernels
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)
S=$(scripts/get-model.sh smollm2-135m-instruct)
H=~/.cache/selfspec/prompts/humaneval.jsonl
log() { echo "$(date +%H:%M:%S) $*" >> $R/study.log; }
log "start; load $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. llama.cpp side by side on the same GGUF, 1 and 2 threads, 3 interleaved rounds.
scripts/dev/llama_cpp_side_by_side.sh "$Q" $R/side-by-side/qwen2.5-coder-1.5b --rounds 3
scripts/dev/llama_cpp_side_by_side.sh "$S" $R/side-by-side/smollm2-135m --rounds 3

# 2. selfspec bench: decode against the run's own stream bandwidth, v(gamma) for gamma = 1..8.
for t in 1 2; do
  for d in native bf16; do
    for m in qwen:$Q smollm2:$S; do
      ./build/bin/selfspec bench --model "${m#*:}" --prompt-len 64 --gen 128 --reps 3 --threads $t \
        --weights-dtype $d --verify-cost-rounds 5 --out $R/bench/${m%%:*}-$d-t$t.json
    done
  done
done

# 3. The kernels per format and token count (3 GB pool so the stream is not cached).
for t in 1 2; do
  ./build/bin/packed_matmul_bench --threads $t --reps 5 --pool-mb 3000 \
    --tokens 1,2,3,4,5,6,7,8,9,12,16,64 --json $R/kernels/packed-t$t.json
done

# 4. Accuracy of native and bf16 weights against the file's values in f32.
for d in native bf16; do
  for m in qwen:$Q:qwen2.5-coder-1.5b-instruct smollm2:$S:smollm2-135m-instruct; do
    IFS=: read -r tag file ref <<< "$m"
    ./build/bin/selfspec compare-weights --model "$file" --weights-dtype $d \
      --ids-json tests/data/realmodel/$ref.json --text-file /usr/share/common-licenses/GPL-3 \
      --window 256 --max-windows 8 --json --out $R/accuracy/$tag-$d.json
  done
done

# 5. Issue 10's Qwen skip-set evaluation (same searched set, same 4 HumanEval evaluation
#    prompts, 48 tokens, 1 thread), native and bf16 weights.
for d in native bf16; do
  for ctl in "adaptive" "fixed --max-draft 1" "fixed --max-draft 2" "fixed --max-draft 3"; do
    tag=$(echo "$ctl" | sed 's/ --max-draft /-k/')
    ./build/bin/selfspec bench --model "$Q" --prompts-file $H --gen 48 --max-prompts-per-task 4 \
      --threads 1 --weights-dtype $d --controller $ctl --spec layer-skip \
      --skip-config configs/skips/qwen2.5-coder-1.5b-bo.json --out $R/skip-bench/bench-bo-$d-$tag.json
  done
done
log "end; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 $R/tables.py > $R/tables.md
python3 $R/plot.py
