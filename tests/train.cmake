# strata-train run as a user runs it; each check is a mode of train_check.cmake (exit status, stdout and stderr).
foreach(check json lines bad_device bad_data bad_option bad_numbers checkpoint_guard full_stdout signals)
  add_test(NAME strata_train_${check}
    COMMAND ${CMAKE_COMMAND} -DTRAIN=$<TARGET_FILE:strata-train> -DCHECK=${check} -DWORK=${CMAKE_CURRENT_BINARY_DIR}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/train_check.cmake)
endforeach()
# strata-train --task shakespeare on the excerpt in tests/data (shakespeare_check.cmake).
set(shakespeare_checks json lines options corpus signals)
find_program(STRATA_MPIEXEC NAMES mpiexec mpirun)
if(STRATA_HAVE_MPI AND STRATA_MPIEXEC)
  list(APPEND shakespeare_checks ranks)
endif()
foreach(check ${shakespeare_checks})
  add_test(NAME strata_train_shakespeare_${check}
    COMMAND ${CMAKE_COMMAND} -DTRAIN=$<TARGET_FILE:strata-train> -DCHECK=${check} -DWORK=${CMAKE_CURRENT_BINARY_DIR}
            -DDATA=${CMAKE_CURRENT_SOURCE_DIR}/data/shakespeare-excerpt.txt -DMPIEXEC=${STRATA_MPIEXEC}
            "-DFLAGS=-n;2;--allow-run-as-root;--oversubscribe;--bind-to;none"
            -P ${CMAKE_CURRENT_SOURCE_DIR}/shakespeare_check.cmake)
endforeach()
