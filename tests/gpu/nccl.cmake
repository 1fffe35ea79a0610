# NcclComm tests (included from tests/gpu/CMakeLists.txt, which returns early without CUDA).
# One binary, registered twice; under mpirun -np 1 in a build with MPI (label mpi), run directly
# (one rank, a LocalComm as the bootstrap communicator) in a build without:
#   nccl_comm_np1            (label gpu): the collectives and the watchdog on a GPU; every
#                            test skips itself without a device, and ctest then reports "skipped".
#   nccl_watchdog_logic_np1  (label unit:comm): the watchdog's deadline logic, CPU only, so that
#                            it runs (and can fail) on machines without a GPU.
# Run by hand with more ranks: mpirun -np 2 build/bin/nccl_comm_test
add_executable(nccl_comm_test ${CMAKE_CURRENT_LIST_DIR}/nccl_comm_test.cpp)
target_link_libraries(nccl_comm_test PRIVATE selfspec_comm selfspec_test_support GTest::gtest
                                             CUDA::cudart)

set(SELFSPEC_NCCL_TEST_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1
  OMPI_MCA_btl_vader_single_copy_mechanism=none)

if(SELFSPEC_HAVE_MPI)
  target_link_libraries(nccl_comm_test PRIVATE selfspec_mpi_test_main)
  set(SELFSPEC_NCCL_TEST_LAUNCH ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1
                                ${SELFSPEC_MPIRUN_FLAGS} --timeout 120)
  set(SELFSPEC_NCCL_TEST_MPI_LABEL ";mpi")
else()
  target_link_libraries(nccl_comm_test PRIVATE GTest::gtest_main)
  set(SELFSPEC_NCCL_TEST_LAUNCH)
  set(SELFSPEC_NCCL_TEST_MPI_LABEL "")
endif()

add_test(NAME nccl_comm_np1
         COMMAND ${SELFSPEC_NCCL_TEST_LAUNCH} $<TARGET_FILE:nccl_comm_test>
                 --gtest_filter=NcclCommTest.*)
set_tests_properties(nccl_comm_np1 PROPERTIES
  TIMEOUT 180 LABELS "gpu${SELFSPEC_NCCL_TEST_MPI_LABEL}" ENVIRONMENT "${SELFSPEC_NCCL_TEST_ENV}"
  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

add_test(NAME nccl_watchdog_logic_np1
         COMMAND ${SELFSPEC_NCCL_TEST_LAUNCH} $<TARGET_FILE:nccl_comm_test>
                 --gtest_filter=NcclWatchdogLogic.*)
set_tests_properties(nccl_watchdog_logic_np1 PROPERTIES
  TIMEOUT 180 LABELS "unit:comm${SELFSPEC_NCCL_TEST_MPI_LABEL}"
  ENVIRONMENT "${SELFSPEC_NCCL_TEST_ENV}")
