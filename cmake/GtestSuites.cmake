# reprise_gtest_suites(TARGET [TIMEOUT SECONDS] [ENVIRONMENT VAR=VALUE]): one ctest test per GoogleTest suite of
# TARGET (named `Suite.*`), where gtest_discover_tests makes one per test.
#
# For the test binaries that link LibTorch: each of their processes spends about 1 s (2 s under the sanitizers) in
# LibTorch's static initialisation before its first test, and most of their tests take a fraction of that. One
# process per suite instead of per test takes about three minutes of CPU out of a `./run test`. A suite's ctest
# output names the failing test (run one alone with `TARGET --gtest_filter=Suite.Test`); a suite that passes with
# every test skipped (GTEST_SKIP, e.g. without ../shared/traces) is reported skipped (run_gtest_suite.sh).
#
# As with gtest_discover_tests, the suites are listed by running the binary after each build (--gtest_list_tests),
# so a suite added to a source is a ctest test at the next build, without configuring again.
set(REPRISE_GTEST_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/GtestSuitesList.cmake)
set(REPRISE_GTEST_SUITE_RUNNER ${CMAKE_CURRENT_LIST_DIR}/run_gtest_suite.sh)

function(reprise_gtest_suites target)
  cmake_parse_arguments(arg "" "TIMEOUT" "ENVIRONMENT" ${ARGN})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "EXECUTABLE=$<TARGET_FILE:${target}>" -D "OUT=${include_file}"
            -D "RUNNER=${REPRISE_GTEST_SUITE_RUNNER}"
            -D "WORKING_DIRECTORY=${CMAKE_CURRENT_BINARY_DIR}" -D "TIMEOUT=${arg_TIMEOUT}"
            -D "ENVIRONMENT=${arg_ENVIRONMENT}" -P ${REPRISE_GTEST_SUITES_SCRIPT}
    BYPRODUCTS ${include_file}
    COMMENT "Listing the test suites of ${target}"
    VERBATIM)
  # ctest reads it if it is there; before the first build, as with gtest's own, one test TARGET_NOT_BUILT says so.
  set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake)
  file(WRITE ${wrapper}
       "if(EXISTS \"${include_file}\")\n  include(\"${include_file}\")\nelse()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${wrapper})
endfunction()
