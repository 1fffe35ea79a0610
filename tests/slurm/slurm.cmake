# The real Slurm test: tests/slurm/run_cpu_smoke.sh brings up munged, slurmctld and slurmd on
# localhost (installing slurmctld/slurmd/munge/libpmix-dev if missing), submits the real
# scripts/slurm/cpu_smoke.sbatch, checks that 1 rank and 2 ranks (srun --mpi=pmix) give identical
# tokens, a preempted job stops cleanly, and scripts/slurm/serve.sbatch serves a completion over 2
# ranks and drains on SIGTERM; then stops everything it started. Needs root (skipped otherwise: exit code 77) and the
# selfspec binary in ${CMAKE_BINARY_DIR}/bin. RUN_SERIAL: it owns the ports and
# /etc/slurm/slurm.conf of this machine while it runs. `ctest -L slurm` runs it alone. A build
# without MPI cannot run the 2-rank step: the test is registered as skipped.
if(NOT SELFSPEC_HAVE_MPI)
  selfspec_add_skipped_test(slurm_cpu_smoke "${SELFSPEC_NO_MPI_SKIP_REASON}"
                            LABELS "slurm;integration")
  return()
endif()
add_test(NAME slurm_cpu_smoke
         COMMAND ${CMAKE_SOURCE_DIR}/tests/slurm/run_cpu_smoke.sh ${CMAKE_BINARY_DIR})
set_tests_properties(slurm_cpu_smoke PROPERTIES
  LABELS "slurm;integration"
  TIMEOUT 900
  SKIP_RETURN_CODE 77
  RUN_SERIAL TRUE)
