# strata-train's progress under mpiexec -n 2: Open MPI gives each rank a pseudo-terminal even though this check reads
# a pipe, so isatty() is true on rank 0, which then prints a plain line at each tenth of the epoch instead of a bar
# redrawn with carriage returns (Note [Progress under an MPI launcher] in tools/train/progress.h).
# 1280 images, 64 per rank and step: 10 steps.
execute_process(COMMAND ${MPIEXEC} ${FLAGS} ${TRAIN} --epochs 1 --train-images 1280 --test-images 100
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 200)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit ${rc} under mpiexec\n${out}\n${err}")
endif()
if(out MATCHES "\r")
  message(FATAL_ERROR "a carriage return in rank 0's output under mpiexec:\n${out}")
endif()
if(NOT out MATCHES "\nepoch 1/1  step 5/10 \\(50%\\)  [^\n]* img/s  ETA [^\n]*\n")
  message(FATAL_ERROR "no progress line at half the epoch:\n${out}")
endif()
if(NOT out MATCHES "\nepoch 1/1  train loss ")
  message(FATAL_ERROR "no epoch line:\n${out}")
endif()
message(STATUS "rank 0's output under mpiexec:\n${out}")
