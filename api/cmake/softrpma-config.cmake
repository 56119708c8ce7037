# softrpma-config.cmake: softrpma for CMake projects (docs/CI.md, "CMake / CTest"). Installed by
# //api:librpma_pc as <prefix>/lib/cmake/softrpma/softrpma-config.cmake, beside
# <prefix>/lib/pkgconfig/librpma.pc, <prefix>/lib/librpma.so.0 and <prefix>/bin/rpma-sim:
#
#   find_package(softrpma REQUIRED)        # cmake -DCMAKE_PREFIX_PATH=<prefix> (or softrpma_DIR)
#   target_link_libraries(my_app PRIVATE softrpma::rpma)
#   softrpma_add_run_test(my_app_runs COMMAND my_app --once)
#   softrpma_add_sweep_test(my_app_sweep COMMAND my_app --once SHARDS 3 MAX_RUNS 300)
#
# It finds the library through pkg-config (librpma.pc of this tree, first in PKG_CONFIG_PATH,
# so that the distro's librpma.pc of librpma-dev is not taken instead; one that is not
# softrpma's is an error) and registers CTest tests that run rpma-sim (bin/rpma-sim of the tree).
# Each test writes JUnit XML (<build dir>/softrpma-junit/<test>.xml) and a sweep its JSON report
# (<build dir>/softrpma-reports/<test>.json) for CI systems.
include_guard(GLOBAL)

find_package(PkgConfig REQUIRED)
get_filename_component(_softrpma_pc_dir "${CMAKE_CURRENT_LIST_DIR}/../../pkgconfig" ABSOLUTE)
set(_softrpma_saved_pc_path "$ENV{PKG_CONFIG_PATH}")
set(ENV{PKG_CONFIG_PATH} "${_softrpma_pc_dir}:$ENV{PKG_CONFIG_PATH}")
pkg_check_modules(SOFTRPMA REQUIRED IMPORTED_TARGET librpma>=1.3)
pkg_get_variable(_softrpma_mark librpma softrpma)
pkg_get_variable(SOFTRPMA_RPMA_SIM librpma rpma_sim)
pkg_get_variable(SOFTRPMA_LIBDIR librpma libdir)
set(ENV{PKG_CONFIG_PATH} "${_softrpma_saved_pc_path}")
if(NOT _softrpma_mark STREQUAL "1")
  message(FATAL_ERROR "softrpma: the librpma.pc pkg-config found (libdir ${SOFTRPMA_LIBDIR}) is "
                      "not softrpma's; put <softrpma prefix>/lib/pkgconfig first in "
                      "PKG_CONFIG_PATH")
endif()
if(NOT EXISTS "${SOFTRPMA_RPMA_SIM}")
  message(FATAL_ERROR "softrpma: no rpma-sim at ${SOFTRPMA_RPMA_SIM} (librpma.pc's rpma_sim)")
endif()
set(softrpma_FOUND TRUE)
set(softrpma_VERSION "${SOFTRPMA_VERSION}")

# softrpma::rpma: softrpma's librpma (its headers, -lrpma -libverbs -lrdmacm).
if(NOT TARGET softrpma::rpma)
  add_library(softrpma::rpma INTERFACE IMPORTED)
  target_link_libraries(softrpma::rpma INTERFACE PkgConfig::SOFTRPMA)
endif()

# The command words of COMMAND, a target's name first replaced by its file.
function(_softrpma_command out)
  set(words ${ARGN})
  list(GET words 0 first)
  if(TARGET "${first}")
    list(REMOVE_AT words 0)
    list(INSERT words 0 "$<TARGET_FILE:${first}>")
  endif()
  set(${out} ${words} PARENT_SCOPE)
endfunction()

# softrpma_add_run_test(NAME COMMAND prog [args...] [FAULTS spec] [SEED s] [DEVICE d])
# A test that runs `rpma-sim run -- prog args` (with --faults, --seed, --device when given): it
# passes when the program exits 0 on the simulated NIC.
function(softrpma_add_run_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "FAULTS;SEED;DEVICE" "COMMAND")
  if(NOT ARG_COMMAND)
    message(FATAL_ERROR "softrpma_add_run_test(${name}): COMMAND is required")
  endif()
  _softrpma_command(command ${ARG_COMMAND})
  set(flags --junit=${CMAKE_BINARY_DIR}/softrpma-junit/${name}.xml)
  if(DEFINED ARG_FAULTS)
    list(APPEND flags "--faults=${ARG_FAULTS}")
  endif()
  if(DEFINED ARG_SEED)
    list(APPEND flags "--seed=${ARG_SEED}")
  endif()
  if(DEFINED ARG_DEVICE)
    list(APPEND flags "--device=${ARG_DEVICE}")
  endif()
  file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/softrpma-junit")
  add_test(NAME ${name} COMMAND "${SOFTRPMA_RPMA_SIM}" run ${flags} -- ${command})
  set_tests_properties(${name} PROPERTIES LABELS "softrpma;rpma-sim-run")
endfunction()

# softrpma_add_sweep_test(NAME COMMAND prog [args...] [SHARDS n] [JOBS n] [RUN_TIMEOUT t]
#                         [MAX_RUNS m] [POINTS p,...] [SEED s] [DEVICE d] [LEAKS])
# A test that runs `rpma-sim sweep -- prog args`: it fails when a run crashed or hung (or
# leaked, with LEAKS). With SHARDS n: n tests NAME_shard_K_of_n (`--shard=K/n`, run side by
# side with ctest -j) and NAME_merge, after them, joining their reports (`rpma-sim report
# merge`): the table, report and JUnit XML of the whole sweep.
function(softrpma_add_sweep_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "LEAKS"
                        "SHARDS;JOBS;RUN_TIMEOUT;MAX_RUNS;POINTS;SEED;DEVICE" "COMMAND")
  if(NOT ARG_COMMAND)
    message(FATAL_ERROR "softrpma_add_sweep_test(${name}): COMMAND is required")
  endif()
  if(NOT DEFINED ARG_SHARDS)
    set(ARG_SHARDS 1)
  endif()
  if(NOT ARG_SHARDS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "softrpma_add_sweep_test(${name}): SHARDS must be a number >= 1, "
                        "not '${ARG_SHARDS}'")
  endif()
  _softrpma_command(command ${ARG_COMMAND})
  set(flags)
  foreach(pair "JOBS;-j=" "RUN_TIMEOUT;--timeout=" "MAX_RUNS;--max-runs=" "POINTS;--points="
               "SEED;--seed=" "DEVICE;--device=")
    list(GET pair 0 key)
    list(GET pair 1 flag)
    if(DEFINED ARG_${key})
      list(APPEND flags "${flag}${ARG_${key}}")
    endif()
  endforeach()
  if(ARG_LEAKS)
    list(APPEND flags --leaks)
  endif()
  set(junit_dir "${CMAKE_BINARY_DIR}/softrpma-junit")
  set(report_dir "${CMAKE_BINARY_DIR}/softrpma-reports")
  file(MAKE_DIRECTORY "${junit_dir}" "${report_dir}")
  if(ARG_SHARDS EQUAL 1)
    add_test(NAME ${name}
             COMMAND "${SOFTRPMA_RPMA_SIM}" sweep ${flags} --report=${report_dir}/${name}.json
                     --junit=${junit_dir}/${name}.xml -- ${command})
    set_tests_properties(${name} PROPERTIES LABELS "softrpma;rpma-sim-sweep")
    return()
  endif()
  set(shard_tests)
  set(shard_reports)
  foreach(k RANGE 1 ${ARG_SHARDS})
    set(shard ${name}_shard_${k}_of_${ARG_SHARDS})
    add_test(NAME ${shard}
             COMMAND "${SOFTRPMA_RPMA_SIM}" sweep ${flags} --shard=${k}/${ARG_SHARDS}
                     --report=${report_dir}/${shard}.json --junit=${junit_dir}/${shard}.xml --
                     ${command})
    set_tests_properties(${shard} PROPERTIES LABELS "softrpma;rpma-sim-sweep")
    list(APPEND shard_tests ${shard})
    list(APPEND shard_reports ${report_dir}/${shard}.json)
  endforeach()
  # After every shard, pass or fail (a failed shard fails the merge too, with its replay lines).
  add_test(NAME ${name}_merge
           COMMAND "${SOFTRPMA_RPMA_SIM}" report merge --report=${report_dir}/${name}.json
                   --junit=${junit_dir}/${name}.xml ${shard_reports})
  set_tests_properties(${name}_merge PROPERTIES LABELS "softrpma;rpma-sim-sweep"
                                                DEPENDS "${shard_tests}")
endfunction()
