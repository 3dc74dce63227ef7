# make run builds only what it runs (README, The two commands): configures the run preset in SCRATCH and fails when
# it would build tests, examples, benchmarks, the Python module or MPI, when its target strata_run leaves out
# strata-train or a GPU plugin asked for, or builds anything else; then checks what `make -n run` would do.
# Run with -DSOURCE=<repository> -DSCRATCH=<empty folder> -DPLUGINS="strata_cuda;strata_hip" (those this machine
# builds, which the run preset is configured with).
cmake_minimum_required(VERSION 3.25)
find_program(MAKE make REQUIRED)
file(REMOVE_RECURSE ${SCRATCH})
set(with_cuda OFF)
set(with_hip OFF)
if(strata_cuda IN_LIST PLUGINS)
  set(with_cuda ON)
endif()
if(strata_hip IN_LIST PLUGINS)
  set(with_hip ON)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --preset run -B ${SCRATCH} -DSTRATA_WITH_CUDA=${with_cuda}
                        -DSTRATA_WITH_HIP=${with_hip}
                WORKING_DIRECTORY ${SOURCE} OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --preset run failed (${rc}):\n${out}")
endif()

load_cache(${SCRATCH} READ_WITH_PREFIX cache_ STRATA_BUILD_TESTS STRATA_BUILD_BENCHMARKS STRATA_WITH_PYTHON
           STRATA_WITH_MPI STRATA_BUILD_FUZZERS CMAKE_MAKE_PROGRAM CMAKE_BUILD_TYPE)
foreach(option STRATA_BUILD_TESTS STRATA_BUILD_BENCHMARKS STRATA_WITH_PYTHON STRATA_WITH_MPI STRATA_BUILD_FUZZERS)
  if(cache_${option})
    message(FATAL_ERROR "the run preset has ${option}=${cache_${option}}; make run builds none of that")
  endif()
endforeach()
if(NOT cache_CMAKE_BUILD_TYPE STREQUAL "Release")
  message(FATAL_ERROR "the run preset builds ${cache_CMAKE_BUILD_TYPE}, not Release")
endif()

# The run build preset (cmake --build --preset run, as make run calls it) builds strata_run alone.
file(READ ${SOURCE}/CMakePresets.json presets)
string(JSON count LENGTH "${presets}" buildPresets)
math(EXPR last "${count} - 1")
set(targets "(no run build preset)")
foreach(i RANGE ${last})
  string(JSON name GET "${presets}" buildPresets ${i} name)
  if(name STREQUAL "run")
    string(JSON targets GET "${presets}" buildPresets ${i} targets)
  endif()
endforeach()
if(NOT targets STREQUAL "[ \"strata_run\" ]")
  message(FATAL_ERROR "the run build preset builds ${targets}, not strata_run alone")
endif()

# What strata_run depends on, directly: strata-train and the plugins, nothing else.
execute_process(COMMAND ${cache_CMAKE_MAKE_PROGRAM} -C ${SCRATCH} -t query strata_run OUTPUT_VARIABLE query
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the run preset has no target strata_run (${rc}): ${query}")
endif()
# ninja lists the inputs indented by four spaces, between "input: phony" and "  outputs:".
string(REGEX MATCH "input: phony\n((    [^\n]+\n)*)" found "${query}")
string(REGEX REPLACE "[ ]+" "" inputs "${CMAKE_MATCH_1}")
string(STRIP "${inputs}" inputs)
string(REPLACE "\n" ";" inputs "${inputs}")
set(expected bin/strata-train)
foreach(plugin IN LISTS PLUGINS)
  list(APPEND expected lib/lib${plugin}.so)
endforeach()
list(SORT inputs)
list(SORT expected)
if(NOT inputs STREQUAL expected)
  message(FATAL_ERROR "strata_run depends on '${inputs}', expected '${expected}'")
endif()
# Everything it builds: libstrata's, strata-train's and the plugins' sources, no test, example, benchmark or tool.
execute_process(COMMAND ${cache_CMAKE_MAKE_PROGRAM} -C ${SCRATCH} -t commands strata_run OUTPUT_VARIABLE commands)
foreach(unwanted tests/ examples/ bench/ python/ fuzz/ tools/smi/ tools/bench/)
  set(unwanted "${SOURCE}/${unwanted}")
  string(FIND "${commands}" "${unwanted}" at)
  if(NOT at EQUAL -1)
    string(SUBSTRING "${commands}" ${at} 200 context)
    message(FATAL_ERROR "strata_run builds something of ${unwanted}: ...${context}")
  endif()
endforeach()

# make run's commands (make -n runs none of them): the run preset, its target, the plugin choice passed on, and
# install-deps for make run only (with the HIP compiler when the HIP plugin is asked for). Without the variables of
# a make that runs this test (make test PRESET=cpu passes PRESET down in MAKEFLAGS).
foreach(choice "OFF;OFF" "ON;ON")
  list(GET choice 0 cuda)
  list(GET choice 1 hip)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=MAKEFLAGS --unset=MFLAGS --unset=MAKELEVEL --unset=PRESET
                          ${MAKE} -n -C ${SOURCE} run STRATA_WITH_CUDA=${cuda} STRATA_WITH_HIP=${hip}
                  OUTPUT_VARIABLE plan ERROR_VARIABLE plan RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "make -n run failed (${rc}):\n${plan}")
  endif()
  set(deps "scripts/install-deps --run\n")
  if(hip)
    set(deps "scripts/install-deps --run --hip\n")
  endif()
  foreach(step "${deps}" "cmake --preset run -DSTRATA_WITH_CUDA=${cuda} -DSTRATA_WITH_HIP=${hip}\n"
               "cmake --build --preset run\n" "./build/run/bin/strata-train --recipe fast")
    string(FIND "${plan}" "${step}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "make run with STRATA_WITH_CUDA=${cuda} STRATA_WITH_HIP=${hip} does not run '${step}':\n${plan}")
    endif()
  endforeach()
  if(plan MATCHES "preset default|install-deps\n")
    message(FATAL_ERROR "make run builds the default preset or installs every package:\n${plan}")
  endif()
endforeach()
file(REMOVE_RECURSE ${SCRATCH})
message(STATUS "run preset: strata_run builds ${expected}")
