# ctest label "fuzz": each parser fuzz target runs its seeds and past findings, then fuzzes for
# SELFSPEC_FUZZ_SECONDS (tests/fuzz/run_fuzz_test.sh). The targets are built with clang by
# scripts/build-fuzz.sh into <build dir>/fuzz (scripts/test.sh runs it before ctest), not by this
# gcc build; without clang's libFuzzer runtime the tests report themselves skipped.
set(SELFSPEC_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzz target fuzzes in the test suite")
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)
foreach(name IN LISTS SELFSPEC_FUZZ_TARGETS)
  add_test(NAME fuzz_${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_fuzz_test.sh ${PROJECT_BINARY_DIR}/fuzz ${name}
                   ${SELFSPEC_FUZZ_SECONDS} ${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name})
  math(EXPR timeout "${SELFSPEC_FUZZ_SECONDS} + 120")
  set_tests_properties(fuzz_${name} PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
endforeach()
