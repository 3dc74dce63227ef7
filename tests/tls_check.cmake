# Fails when libstrata reaches another library's thread-locals through the initial-exec TLS model
# (strata/CMakeLists.txt): that model needs those thread-locals in static TLS, which a library loaded earlier with
# dlopen (libstdc++, when PyTorch is imported first) does not have, and libstrata then cannot be loaded at all.
# std::call_once and std::promise are what brought them in. Run with -DLIBRARY=<file>.
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -rW ${LIBRARY} OUTPUT_VARIABLE relocations RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -r ${LIBRARY} failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]*_TPOFF(64|32)[ ]+[0-9a-f]+ [^\n]*@[^\n]*" foreign "${relocations}")
if(foreign)
  string(REPLACE ";" "\n" foreign "${foreign}")
  message(FATAL_ERROR "${LIBRARY} reads other libraries' thread-locals with initial-exec TLS (avoid std::call_once "
                      "and std::promise in libstrata):\n${foreign}")
endif()
message(STATUS "${LIBRARY}: initial-exec TLS for its own thread-locals only")
