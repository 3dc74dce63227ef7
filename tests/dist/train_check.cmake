# strata-train under mpiexec -n 2 (batch 64 per rank) reaches the test accuracy of one process with batch 128 on the
# same images, within half a point: the two see the same 128 images per step (Note [Training on several ranks]).
set(ARGS --epochs 1 --train-images 3200 --test-images 1000 --json)
execute_process(COMMAND ${MPIEXEC} ${FLAGS} ${TRAIN} ${ARGS} --batch-size 64
                OUTPUT_VARIABLE ranks ERROR_VARIABLE ranks_err RESULT_VARIABLE ranks_rc TIMEOUT 200)
execute_process(COMMAND ${TRAIN} ${ARGS} --batch-size 128
                OUTPUT_VARIABLE one ERROR_VARIABLE one_err RESULT_VARIABLE one_rc TIMEOUT 200)
if(NOT ranks_rc EQUAL 0 OR NOT one_rc EQUAL 0)
  message(FATAL_ERROR "exit ${ranks_rc} (2 ranks) and ${one_rc} (one process)\n${ranks}\n${ranks_err}\n${one_err}")
endif()
string(JSON world GET "${ranks}" ranks)
string(JSON acc_ranks GET "${ranks}" final_test_accuracy)
string(JSON acc_one GET "${one}" final_test_accuracy)
if(NOT world EQUAL 2)
  message(FATAL_ERROR "strata-train under mpiexec -n 2 reports ${world} ranks")
endif()
# CMake's math has no floating point: compare in units of 0.0001.
string(REGEX REPLACE "^0\\.([0-9][0-9][0-9][0-9]).*" "\\1" a "${acc_ranks}0000")
string(REGEX REPLACE "^0\\.([0-9][0-9][0-9][0-9]).*" "\\1" b "${acc_one}0000")
math(EXPR diff "${a} - ${b}")
if(diff GREATER 50 OR diff LESS -50)
  message(FATAL_ERROR "test accuracy ${acc_ranks} with 2 ranks against ${acc_one} in one process: more than 0.5 points")
endif()
message(STATUS "2 ranks: ${acc_ranks}; one process: ${acc_one}")
