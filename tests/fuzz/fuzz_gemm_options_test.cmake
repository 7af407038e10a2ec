# fuzz_gemm's own options (issue 19): a bad --cpu-check-every / MXDIFF_CPU_CHECK_EVERY is exit status
# 2 with one line naming it; --cpu-check-every=0 says the CPU reference judges every case, and
# MXDIFF_STATS_FILE gets the counters the campaign reads. Run by ctest (tests/fuzz/CMakeLists.txt)
# with FUZZ_GEMM, CORPUS, REPLAY_FLAGS, WORK.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
foreach(bad "--cpu-check-every=x" "--cpu-check-every=-3" "--cpu-check-every=1000001")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=protect_shadow_gap=0
                          ${FUZZ_GEMM} ${REPLAY_FLAGS} ${bad} ${CORPUS}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 2 OR NOT err MATCHES "fuzz_gemm: not fuzzing: --cpu-check-every '[^']*' is not a whole number in 0..1000000\n")
    message(FATAL_ERROR "${bad}: exit ${status}, not 2 with a one-line message:\n${out}\n${err}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=protect_shadow_gap=0 MXDIFF_CPU_CHECK_EVERY=many
                        ${FUZZ_GEMM} ${REPLAY_FLAGS} ${CORPUS}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 2 OR NOT err MATCHES "not fuzzing: MXDIFF_CPU_CHECK_EVERY 'many' is not a whole number")
  message(FATAL_ERROR "MXDIFF_CPU_CHECK_EVERY=many: exit ${status}, not 2:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=protect_shadow_gap=0 MXDIFF_STATS_FILE=${WORK}/stats.txt
                        ${FUZZ_GEMM} ${REPLAY_FLAGS} --cpu-check-every=0 ${CORPUS}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT err MATCHES "fuzz_gemm: oracle: the CPU reference for every case \\(--cpu-check-every=0\\)")
  message(FATAL_ERROR "--cpu-check-every=0: exit ${status}:\n${out}\n${err}")
endif()
file(READ ${WORK}/stats.txt stats)
if(NOT stats MATCHES "(^|\n)cases [1-9][0-9]*\n" OR NOT stats MATCHES "\ndevice_oracle 0\n" OR
   NOT stats MATCHES "\ndevice 0\n" OR NOT stats MATCHES "\nseconds [0-9.]+\n")
  message(FATAL_ERROR "the stats file is not what the campaign reads:\n${stats}")
endif()
file(REMOVE_RECURSE ${WORK})
