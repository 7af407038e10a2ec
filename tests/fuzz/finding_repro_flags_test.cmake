# fuzz_gemm with an external kernel that flips a bit: the known cases give a finding at start-up,
# and its .txt's repro command carries --external=LIB (a finding of that kernel replays only with
# it). Run by ctest (tests/fuzz/CMakeLists.txt) with FUZZ_GEMM, EXAMPLE_KERNEL, CORPUS, WORK.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -E env MXDIFF_EXAMPLE_KERNEL_FLIP=1 MXDIFF_FINDINGS_DIR=${WORK}
                        ASAN_OPTIONS=protect_shadow_gap=0:handle_abort=0
                        ${FUZZ_GEMM} ${REPLAY_FLAGS} --external=${EXAMPLE_KERNEL} ${CORPUS}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(GLOB sidecars "${WORK}/fuzz_gemm.mismatch_*.txt")
if(NOT sidecars)
  message(FATAL_ERROR "fuzz_gemm wrote no finding (exit ${status}):\n${out}\n${err}")
endif()
list(GET sidecars 0 sidecar)
file(READ ${sidecar} text)
string(FIND "${text}" ".case --external=${EXAMPLE_KERNEL}\n" found)
if(found EQUAL -1)
  message(FATAL_ERROR "the finding's repro command lacks --external=${EXAMPLE_KERNEL}:\n${text}")
endif()
file(REMOVE_RECURSE ${WORK})
