# A rank that leaves early: the other rank's collective fails with CollectiveTimeoutError within the timeout (3 s
# here), rather than hanging. mpiexec then reports rank 0's exit without MPI_Finalize, so its exit code is not
# checked; rank 0's own message and the time are.
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env STRATA_DIST_TIMEOUT=3 ${MPIEXEC} ${FLAGS} ${PROGRAM} --gtest_filter=MpiFailures.*
  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100 RESULT_VARIABLE rc)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
if(NOT out MATCHES "rank 0 timed out as expected: [^\n]*did not finish within 3 s")
  message(FATAL_ERROR "expected rank 0's timeout message (exit ${rc}, ${seconds} s)\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(out MATCHES "FAILED")
  message(FATAL_ERROR "a rank's test failed:\n${out}")
endif()
if(seconds GREATER 60)
  message(FATAL_ERROR "took ${seconds} s: the failure must come within the timeout")
endif()
