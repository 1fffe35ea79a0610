#!/usr/bin/env bash
# Tensor parallelism across nodes on the namespace cluster (ctest multinode_tp_across_nodes): a
# small seeded checkpoint, greedy, through `srun --mpi=pmix`: TP 4 as 2 nodes x 2 ranks and as
# 1 node x 4, TP 2 as 2 nodes x 1 and 1 node x 2: identical tokens per TP whatever the layout; the
# start lines show each rank's node; Open MPI's shared-memory transport alone cannot connect the
# ranks of the 2-node layout (so TCP between the namespaces carries them). The batch script on
# the same cluster: tp16_sbatch.sh.
#
#   tests/multinode/tp_across_nodes.sh BUILD_DIR      exit 0 pass, 1 fail, 77 skipped
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mn_init tp_across_nodes "${1:?usage: $0 BUILD_DIR}"

"$bin" make-model --out "$work/model" --layers 4 --hidden 256 --heads 8 --kv-heads 4 \
  --intermediate 512 --vocab 4000 --seed 3 > /dev/null
gen=(generate --model "$work/model" --device cpu --threads 1 --prompt-ids 1,2,3,4
     --max-new-tokens 12 --ignore-eos --json)
layouts=("4 2 2" "4 1 4" "2 2 1" "2 1 2")  # TP NODES RANKS_PER_NODE
for layout in "${layouts[@]}"; do
  read -r tp nodes per <<< "$layout"
  name=tp$tp-${nodes}x$per
  # (one node of 2 CPUs takes 4 ranks only as --overcommit without --ntasks-per-node)
  spread=()
  [ "$nodes" -eq 1 ] || spread=(--ntasks-per-node="$per")
  timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 --overcommit --nodes="$nodes" \
    --ntasks="$tp" "${spread[@]}" "$bin" "${gen[@]}" --tp "$tp" \
    > "$work/$name.out" 2> "$work/$name.log" || mn_fail "$name: srun failed"
  log "$name: $(mn_tokens "$work/$name.out")"
done
for tp in 4 2; do
  a=$(mn_tokens "$work/tp$tp-2x$((tp / 2)).out") b=$(mn_tokens "$work/tp$tp-1x$tp.out")
  [ -n "$a" ] && [ "$a" = "$b" ] || mn_fail "TP $tp: 2 nodes gave '$a', 1 node '$b'"
done
for r in 0 1 2 3; do
  node=ssnode$((r / 2 + 1))
  grep -q "start \[rank $r/4 $node\]" "$work/tp4-2x2.log" ||
    mn_fail "tp4-2x2: no start line of rank $r on $node"
done
if OMPI_MCA_btl=self,vader timeout 60 srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 \
  --ntasks=2 --ntasks-per-node=1 "$bin" "${gen[@]}" --tp 2 > "$work/vader-only.out" \
  2> "$work/vader-only.log"; then
  mn_fail "2 nodes connected with shared memory only: the nodes are not separate hosts"
fi
# (Open MPI's bml/r2 "unreachable proc" help text; its topic name where the help file is missing)
grep -qE "unable to reach each other|unreachable proc" "$work/vader-only.log" ||
  mn_fail "shared-memory-only run failed for another reason than reachability"
log "PASS: identical tokens across layouts at TP 4 and TP 2; start lines name the nodes; TCP" \
    "carries the ranks between nodes"
