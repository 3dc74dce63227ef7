# strata-bench and the scripts around it (bench/compare-*/run, bench/plot-ratios) run as a user runs them; each check is a mode of bench_check.cmake (exit status, stdout and stderr).
foreach(check json bad_workload compare_bad_arguments plot_bad_input)
  add_test(NAME strata_bench_${check}
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:strata-bench> -DCHECK=${check} -DROOT=${PROJECT_SOURCE_DIR}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/bench_check.cmake)
endforeach()
set_tests_properties(strata_bench_json PROPERTIES TIMEOUT 60)
