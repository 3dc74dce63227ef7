# strata-train run as a user runs it; each check is a mode of train_check.cmake (exit status, stdout and stderr).
foreach(check json lines bad_device bad_data bad_option bad_numbers checkpoint_guard full_stdout signals)
  add_test(NAME strata_train_${check}
    COMMAND ${CMAKE_COMMAND} -DTRAIN=$<TARGET_FILE:strata-train> -DCHECK=${check} -DWORK=${CMAKE_CURRENT_BINARY_DIR}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/train_check.cmake)
endforeach()
