# strata-bench run as a user runs it; each check is a mode of bench_check.cmake (exit status, stdout and stderr).
foreach(check json bad_workload)
  add_test(NAME strata_bench_${check}
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:strata-bench> -DCHECK=${check}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/bench_check.cmake)
endforeach()
set_tests_properties(strata_bench_json PROPERTIES TIMEOUT 60)
