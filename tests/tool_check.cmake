# Shared by the <tool>_check.cmake scripts, which set TOOL (the name in messages) and CHECK before including this.

# Runs a command and keeps its exit status, stdout and stderr in rc, out and err.
function(run_tool)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

# Fails the check unless the condition holds, showing what the tool did.
function(expect condition_text)
  if(NOT (${ARGN}))
    message(FATAL_ERROR "${TOOL} ${CHECK}: expected ${condition_text}\nexit: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
endfunction()
