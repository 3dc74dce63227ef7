# The installed package works for a project outside this tree: find_package(strata), <strata/strata.h>, and the
# installed strata-smi runs. Needs a complete build (cmake --install installs every target). The consumer is built
# with this build's compiler and linker flags, so a sanitizer build links a consumer with the same sanitizer runtime.
add_test(NAME install_consumer
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install_consumer.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                 "${CMAKE_CXX_FLAGS}" "${CMAKE_EXE_LINKER_FLAGS}")
