#!/usr/bin/env bash
# Plain mpirun across the namespace cluster's nodes, no Slurm and no ssh (ctest
# multinode_mpirun_agent): mpirun runs on node 1 and starts its daemon on node 2 through the
# cluster's launch agent (plm_rsh_agent: `netns_cluster.sh __rsh HOST CMD`, which enters the
# node's namespaces where ssh would log in). TP 4 as 2 x 2 must give the tokens of TP 4 on one node
# under mpirun, and the start lines must name both nodes.
#
#   tests/multinode/mpirun_agent.sh BUILD_DIR      exit 0 pass, 1 fail, 77 skipped
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mn_init mpirun_agent "${1:?usage: $0 BUILD_DIR}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$bin" make-model --out "$work/model" --layers 4 --hidden 256 --heads 8 --kv-heads 4 \
  --intermediate 512 --vocab 4000 --seed 7 > /dev/null
gen=("$bin" generate --model "$work/model" --device cpu --threads 1 --tp 4 --prompt-ids 5,6,7
     --max-new-tokens 10 --ignore-eos --json)
timeout 120 "$cluster" exec 1 mpirun --host ssnode1:2,ssnode2:2 -np 4 \
  --mca plm_rsh_agent "$("$cluster" rsh-agent)" --mca plm_rsh_no_tree_spawn 1 "${gen[@]}" \
  > "$work/two-nodes.out" 2> "$work/two-nodes.log" || mn_fail "mpirun over 2 nodes failed"
timeout 120 "$cluster" exec 1 mpirun --oversubscribe --host ssnode1:4 -np 4 "${gen[@]}" \
  > "$work/one-node.out" 2> "$work/one-node.log" || mn_fail "mpirun on one node failed"
for r in 0 1 2 3; do
  node=ssnode$((r / 2 + 1))
  grep -q "start \[rank $r/4 $node\]" "$work/two-nodes.log" || mn_fail "no start line of rank $r on $node"
done
a=$(mn_tokens "$work/two-nodes.out") b=$(mn_tokens "$work/one-node.out")
[ -n "$a" ] && [ "$a" = "$b" ] || mn_fail "2 nodes gave '$a', 1 node '$b'"
log "PASS: mpirun with the namespace launch agent ran TP 4 over ssnode1 and ssnode2; tokens $a" \
    "identical to one node"
