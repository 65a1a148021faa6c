# Run as `cmake -D EXECUTABLE=... -D RUNNER=... -D OUT=... -D WORKING_DIRECTORY=... -D TIMEOUT=... -D ENVIRONMENT=...
# -P` after a test binary is built (GtestSuites.cmake): writes OUT, the add_test() of each of its GoogleTest suites,
# each run by RUNNER (run_gtest_suite.sh).
execute_process(COMMAND ${EXECUTABLE} --gtest_list_tests
                WORKING_DIRECTORY ${WORKING_DIRECTORY}
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 120)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${EXECUTABLE} --gtest_list_tests exited ${status}:\n${errors}${listing}")
endif()

# A suite is a line that does not start with a space: `Suite.`, or `Prefix/Suite.  # TypeParam = ...`. Brackets
# and semicolons (in a parameter's printed value) would keep CMake from splitting the lines into a list.
string(REPLACE "[" "<" listing "${listing}")
string(REPLACE "]" ">" listing "${listing}")
string(REPLACE ";" "," listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( |$)")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES suites)
if(NOT suites)
  message(FATAL_ERROR "${EXECUTABLE} --gtest_list_tests lists no test suite:\n${listing}")
endif()

set(script "# Written by cmake/GtestSuitesList.cmake from ${EXECUTABLE} --gtest_list_tests.\n")
foreach(suite IN LISTS suites)
  set(name "${suite}.*")
  string(APPEND script
         "add_test([==[${name}]==] [==[${RUNNER}]==] [==[${EXECUTABLE}]==] [==[${suite}]==])\n"
         "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==]"
         " TIMEOUT ${TIMEOUT} SKIP_RETURN_CODE 77")
  if(ENVIRONMENT)
    string(APPEND script " ENVIRONMENT [==[${ENVIRONMENT}]==]")
  endif()
  string(APPEND script ")\n")
endforeach()
file(WRITE ${OUT} "${script}")
