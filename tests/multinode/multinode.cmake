# Multi-node tests (label "multinode"): a 2-node Slurm cluster of network namespaces on this
# machine (tests/scripts/multinode/netns_cluster.sh), brought up once by the fixture
# multinode_cluster and taken down after the last test, even when tests fail:
#   multinode_tp_across_nodes  TP 4 / TP 2 over 2 nodes = 1 node, tokens (tp_across_nodes.sh)
#   multinode_tp16_sbatch      tp16_two_nodes.sbatch scaled to 2 x 2 on the 70B geometry: lossless,
#                              = 1 node (tp16_sbatch.sh)
#   multinode_mpirun_agent     plain mpirun across the nodes through the launch agent
#   multinode_link_down        a node's link goes down mid-job: survivors exit within the
#   multinode_node_killed      collective deadline, the job ends, finished results stay on disk;
#   multinode_slow_link        a slow link is not taken for a dead one (node_failures.sh)
# Needs root, network namespaces and Slurm (skipped with the reason otherwise: exit code 77), and
# MPI (a build without it registers them as skipped). RUN_SERIAL: they own the cluster and time
# collective deadlines, so nothing else may load the 2 cores meanwhile. `ctest -L multinode`.
set(multinode_tests tp_across_nodes tp16_sbatch mpirun_agent link_down node_killed slow_link)
if(NOT SELFSPEC_HAVE_MPI)
  foreach(name ${multinode_tests})
    selfspec_add_skipped_test(multinode_${name} "${SELFSPEC_NO_MPI_SKIP_REASON}"
                              LABELS "multinode;integration")
  endforeach()
  return()
endif()
set(multinode_dir ${CMAKE_SOURCE_DIR}/tests/multinode)
add_test(NAME multinode_cluster_up
         COMMAND ${multinode_dir}/cluster_fixture.sh up ${CMAKE_BINARY_DIR})
add_test(NAME multinode_cluster_down
         COMMAND ${multinode_dir}/cluster_fixture.sh down ${CMAKE_BINARY_DIR})
set_tests_properties(multinode_cluster_up PROPERTIES FIXTURES_SETUP multinode_cluster TIMEOUT 180)
set_tests_properties(multinode_cluster_down PROPERTIES FIXTURES_CLEANUP multinode_cluster
                                                       TIMEOUT 120)
add_test(NAME multinode_tp_across_nodes
         COMMAND ${multinode_dir}/tp_across_nodes.sh ${CMAKE_BINARY_DIR})
add_test(NAME multinode_tp16_sbatch COMMAND ${multinode_dir}/tp16_sbatch.sh ${CMAKE_BINARY_DIR})
add_test(NAME multinode_mpirun_agent COMMAND ${multinode_dir}/mpirun_agent.sh ${CMAKE_BINARY_DIR})
foreach(mode link-down node-killed slow-link)
  string(REPLACE "-" "_" name ${mode})
  add_test(NAME multinode_${name}
           COMMAND ${multinode_dir}/node_failures.sh ${CMAKE_BINARY_DIR} ${mode})
endforeach()
foreach(name cluster_up cluster_down ${multinode_tests})
  set_tests_properties(multinode_${name} PROPERTIES
    LABELS "multinode;integration"
    SKIP_RETURN_CODE 77
    RUN_SERIAL TRUE)
endforeach()
foreach(name ${multinode_tests})
  set_tests_properties(multinode_${name} PROPERTIES FIXTURES_REQUIRED multinode_cluster
                                                    TIMEOUT 600)
endforeach()
