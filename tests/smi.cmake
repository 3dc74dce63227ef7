# strata-smi run as a user runs it; each check is a mode of smi_check.cmake (exit status, stdout and stderr).
foreach(check table json limit virtual_cpus bad_cpu_count bad_option bad_limit full_stdout)
  add_test(NAME strata_smi_${check}
    COMMAND ${CMAKE_COMMAND} -DSMI=$<TARGET_FILE:strata-smi> -DCHECK=${check} -P ${CMAKE_CURRENT_SOURCE_DIR}/smi_check.cmake)
endforeach()
