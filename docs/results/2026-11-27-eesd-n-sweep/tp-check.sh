#!/bin/bash
# Greedy token identity of the new heads across TP degrees (issue 24): Qwen N4 at TP 1 and 2,
# SmolLM2 N4 at TP 1 and 3 (tp-invariant reduction, so TP 3's plain tokens equal TP 1's).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
F=/work/runs/selfspec-final
QM=~/.cache/selfspec/models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf
SM=~/.cache/selfspec/models/SmolLM2-135M-Instruct.Q4_1.gguf
cd /work/runs
QP="$(cat q-eval-prompt.txt)"
SP="$(cat s-eval-prompt.txt)"
qspec="--spec early-exit --exit-head sweep-head-q-n4.safetensors --exit-head-dtype q4_k --draft-vocab qwen15-vocab-code.json --draft-vocab-size 16384 --max-draft 1 --controller fixed --debug-sync"
timeout 300 $F generate --model $QM --prompt "$QP" --max-new-tokens 64 --threads 1 --json > tp-q-plain-tp1.json
timeout 300 $F generate --model $QM --prompt "$QP" --max-new-tokens 64 --threads 1 $qspec --json > tp-q-spec-tp1.json
timeout 600 mpirun -np 2 --oversubscribe $F generate --model $QM --prompt "$QP" --max-new-tokens 64 --threads 1 $qspec --json > tp-q-spec-tp2.json
sspec="--spec early-exit --exit-head sweep-head-s-n4.safetensors --draft-vocab smollm2-vocab.json --draft-vocab-size 8192 --max-draft 1 --controller fixed --debug-sync --reduction tp-invariant"
timeout 300 $F generate --model $SM --chat --prompt "$SP" --max-new-tokens 64 --threads 1 --reduction tp-invariant --json > tp-s-plain-tp1.json
timeout 600 mpirun -np 3 --oversubscribe $F generate --model $SM --chat --prompt "$SP" --max-new-tokens 64 --threads 1 $sspec --json > tp-s-spec-tp3.json
timeout 600 mpirun -np 3 --oversubscribe $F generate --model $SM --chat --prompt "$SP" --max-new-tokens 64 --threads 1 --reduction tp-invariant --json > tp-s-plain-tp3.json
python3 - <<'PY'
import json
def last(f):
    return json.loads(open(f).read().strip().splitlines()[-1])
for a, b in [("tp-q-plain-tp1", "tp-q-spec-tp1"), ("tp-q-plain-tp1", "tp-q-spec-tp2"),
             ("tp-s-plain-tp1", "tp-s-spec-tp3"), ("tp-s-plain-tp1", "tp-s-plain-tp3")]:
    x, y = last(a + ".json"), last(b + ".json")
    print(a, b, "identical" if x["tokens"] == y["tokens"] else "DIFFER", len(x["tokens"]),
          "drafted", y.get("drafted"), "accepted", y.get("accepted"))
PY
