# The exit-status contract's numbers (0 clean, 1 a check failed, 2 bad input, 3 inconclusive) are
# named once, in reference/exit_status.h (tools/mxdiff/commands.h re-exports them): no std::exit(N)
# and no `return N;` / `? N : M` in a main with a literal status, in fuzz/, checkpoint/ and tools/.
# Run by ctest (tests/fuzz/CMakeLists.txt) with SOURCE_DIR, the repository root.
# Not yet converted, each in a folder another change owns (remove the line once it is):
set(not_yet
    fuzz/targets/fuzz_gemm.cc      # std::exit(2) x2
    tools/repro/repro_main.cc      # its own kExitClean/kExitReproduced/kExitBadInput
    tools/repro/layer_repro.cc)    # return 2 (a status returned to repro_main)
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
set(errors "")
set(checked 0)
file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/fuzz/*.cc ${SOURCE_DIR}/fuzz/*.h
     ${SOURCE_DIR}/checkpoint/*.cc ${SOURCE_DIR}/checkpoint/*.h ${SOURCE_DIR}/tools/*.cc ${SOURCE_DIR}/tools/*.h)
foreach(file ${sources})
  if(file IN_LIST not_yet)
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS ${SOURCE_DIR}/${file} exits REGEX "exit\\( *[0-9]+ *\\)")
  foreach(line ${exits})
    string(STRIP "${line}" line)
    string(APPEND errors "${file}: ${line} (name the status: reference/exit_status.h)\n")
  endforeach()
  file(READ ${SOURCE_DIR}/${file} text)
  if(text MATCHES "int main\\(")
    file(STRINGS ${SOURCE_DIR}/${file} returns REGEX "return +[0-9]+ *;|[?:] +[0-9]+ *[:;]")
    foreach(line ${returns})
      string(STRIP "${line}" line)
      string(APPEND errors "${file}: ${line} (a main's status by name: reference/exit_status.h)\n")
    endforeach()
  endif()
endforeach()
if(checked LESS 100)
  string(APPEND errors "only ${checked} files checked: is SOURCE_DIR (${SOURCE_DIR}) the root?\n")
endif()
if(errors)
  message(FATAL_ERROR "exit-status literals:\n${errors}")
endif()
message(STATUS "exit statuses named: ${checked} files checked")
