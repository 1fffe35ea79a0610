# shellcheck shell=bash
# The slurm.conf settings shared by the clusters the tests bring up (sourced):
# tests/slurm/run_cpu_smoke.sh (one node on localhost) and scripts/multinode/netns_cluster.sh
# (nodes in network namespaces). Root daemons, munge authentication, Slurm's PMIx plugin for
# `srun --mpi=pmix`, no cgroups (proctrack/linuxproc, task/none: containers and VMs often lack
# them), no accounting, CPUs as consumable resources, and slurm.conf trusted over the hardware
# slurmd detects (a container's odd topology must not drain a node).
#
#   slurm_conf_common      prints those lines
slurm_conf_common() {
  cat << 'CONF'
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
CONF
}
