#!/bin/bash
# Greedy identity on SmolLM2 at TP 1 and TP 3 for the searched set, swift and asd (with --debug-sync).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
B=/work/scratch/search/selfspec-eval
M=~/.cache/selfspec/models/SmolLM2-135M-Instruct.Q4_1.gguf
O=/work/scratch/eval/tp3; mkdir -p $O
G="generate --model $M --chat --prompt 'Explain why the sky is blue in three sentences.' --max-new-tokens 64 --threads 1 --json"
run() { name=$1; shift; eval timeout 600 "$@" > $O/$name.json 2> $O/$name.err; echo "$name rc $?"; }
run plain-np1 $B $G
run plain-np3 mpirun -np 3 $B $G
run bo-np1 $B $G --spec layer-skip --skip-config /work/scratch/search/smollm2/bo.json
run bo-np3 mpirun -np 3 $B $G --spec layer-skip --skip-config /work/scratch/search/smollm2/bo.json --debug-sync
run bov-np3 mpirun -np 3 $B $G --spec layer-skip --skip-config /work/scratch/search/smollm2/bo.json --draft-vocab /work/scratch/eval/smol/vocab.json --draft-vocab-size 8192 --debug-sync
run swift-np1 $B $G --spec swift --swift-ratio 0.1 --swift-window 16
run swift-np3 mpirun -np 3 $B $G --spec swift --swift-ratio 0.1 --swift-window 16 --debug-sync
run asd-np3 mpirun -np 3 $B $G --spec asd --debug-sync
python3 - <<'PY'
import json,glob,os
O='/work/scratch/eval/tp3'
def load(n):
    t=open(f'{O}/{n}.json').read().strip().splitlines()
    return json.loads(t[-1]) if t else None
ref=load('plain-np1')['tokens']
for n in ['plain-np3','bo-np1','bo-np3','bov-np3','swift-np1','swift-np3','asd-np3']:
    d=load(n)
    if d is None: print(n,'no output'); continue
    print(n, 'equal' if d['tokens']==ref else 'DIFFERENT', 'alpha', round(d.get('acceptance_rate',0),3), d.get('spec',{}).get('drafter_state',{}) and {k:d['spec']['drafter_state'].get(k) for k in ('best_matchness','steps','best_attention','best_mlp')})
PY
