# softrpma-config.cmake: softrpma for CMake projects (docs/CI.md, "CMake / CTest"). Installed by
# //api:librpma_pc as <prefix>/lib/cmake/softrpma/softrpma-config.cmake, beside
# <prefix>/lib/pkgconfig/librpma.pc, <prefix>/lib/softrpma/librpma.so.0, <prefix>/bin/rpma-sim
# and softrpma-pair.sh (the pair tests' runner):
#
#   find_package(softrpma REQUIRED)        # cmake -DCMAKE_PREFIX_PATH=<prefix> (or softrpma_DIR)
#   target_link_libraries(my_app PRIVATE softrpma::rpma)
#   softrpma_add_run_test(my_app_runs COMMAND my_app --once)
#   softrpma_add_run_test(my_app_fault COMMAND my_app FAULTS "ibv_alloc_pd:fail=EIO:nth=1"
#                         EXPECT_FAILURE)
#   softrpma_add_sweep_test(my_app_sweep COMMAND my_app --once SHARDS 3 MAX_RUNS 300)
#   softrpma_add_pair_test(my_pair SERVER my_server 7204 CLIENT my_client 127.0.0.1 7204)
#
# It finds the library through pkg-config (librpma.pc of this tree, first in PKG_CONFIG_PATH,
# so that the distro's librpma.pc of librpma-dev is not taken instead; one that is not
# softrpma's is an error) and registers CTest tests that run rpma-sim (bin/rpma-sim of the tree).
#
# Every test the functions register:
#   * runs on a simulated fabric of its own (docs/FABRIC.md): its ENVIRONMENT property holds
#     RPMA_SIM_FABRIC=ctest-<test name>-<hash> (see _softrpma_fabric), so that tests run side
#     by side (ctest -j) never meet, even when their servers listen on the same address and
#     port. Add environment with set_property(TEST ... APPEND PROPERTY ENVIRONMENT ...), which
#     keeps it;
#   * writes JUnit XML to <build dir>/softrpma-junit/<test>.xml, whose verdict is the test's in
#     CTest: collect that directory. A sweep writes its JSON report to
#     <build dir>/softrpma-reports/<test>.json.
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
# The runner of softrpma_add_pair_test, beside this file.
set(SOFTRPMA_PAIR_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/softrpma-pair.sh")

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

# The fabric of test NAME (RPMA_SIM_FABRIC takes 1 to 40 characters of [A-Za-z0-9._-]):
# "ctest-" NAME's first 25 characters, each other character made "_", "-" and the first 8 hex
# digits of the MD5 of the build directory and NAME. So two tests never share one, nor does one
# test in two build directories, and the name still says whose it is.
function(_softrpma_fabric out name)
  string(REGEX REPLACE "[^A-Za-z0-9._-]" "_" readable "${name}")
  string(SUBSTRING "${readable}" 0 25 readable)
  string(MD5 hash "${CMAKE_BINARY_DIR}/${name}")
  string(SUBSTRING "${hash}" 0 8 hash)
  set(${out} "ctest-${readable}-${hash}" PARENT_SCOPE)
endfunction()

# At the end of the directory: a warning when test NAME got WILL_FAIL, which inverts CTest's
# verdict but not the test's JUnit case (a CI reading one disagrees with one reading the other).
function(_softrpma_check_will_fail name hint)
  get_test_property(${name} WILL_FAIL will_fail)
  if(will_fail)
    message(WARNING "softrpma: test ${name} has WILL_FAIL: ctest then passes it when it fails, "
                    "but its JUnit file (softrpma-junit/${name}.xml) still shows the failure. "
                    "${hint}")
  endif()
endfunction()

# What every test gets (after its add_test: a command passed through one more function would
# lose the escapes of a FAULTS spec's ';'): its labels, its fabric, the WILL_FAIL warning.
function(_softrpma_setup_test name labels hint)
  _softrpma_fabric(fabric ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}")
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT "RPMA_SIM_FABRIC=${fabric}")
  if(NOT CMAKE_VERSION VERSION_LESS 3.19)
    # A deferred call's arguments are evaluated when it runs: these are spelled out now.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _softrpma_check_will_fail
                                              [==[${name}]==] [==[${hint}]==])")
  endif()
endfunction()

# The rpma-sim flags of FAULTS, SEED and DEVICE (from the caller's ARG_ variables), a list
# whose FAULTS element keeps the ';' between rules (escaped: expand it unquoted once, into
# add_test).
function(_softrpma_sim_flags out)
  set(flags)
  foreach(pair "FAULTS;--faults=" "SEED;--seed=" "DEVICE;--device=")
    list(GET pair 0 key)
    list(GET pair 1 flag)
    if(DEFINED ARG_${key})
      string(REPLACE ";" "\\;" value "${ARG_${key}}")
      list(APPEND flags "${flag}${value}")
    endif()
  endforeach()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# In a helper `fn` whose test is `name`: ARG_<key> defaults to `default` and must be a whole
# number >= 1 (`what` names it in the error: "SHARDS must be a number").
macro(_softrpma_count fn key default what)
  if(NOT DEFINED ARG_${key})
    set(ARG_${key} ${default})
  endif()
  if(NOT ARG_${key} MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "${fn}(${name}): ${what} >= 1, not '${ARG_${key}}'")
  endif()
endmacro()

# softrpma_add_run_test(NAME COMMAND prog [args...] [FAULTS spec] [SEED s] [DEVICE d]
#                       [EXPECT_FAILURE])
# A test that runs `rpma-sim run --junit=... -- prog args` (with --faults, --seed, --device when
# given): it passes when the program exits 0 on the simulated NIC. With EXPECT_FAILURE
# (`run --expect-failure`) it passes when the program fails as a correct program reports an
# injected fault (a non-zero exit, no crash or sanitizer report), and its JUnit case passes too;
# use it rather than WILL_FAIL, which inverts only CTest's verdict (a warning says so).
function(softrpma_add_run_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "EXPECT_FAILURE" "FAULTS;SEED;DEVICE" "COMMAND")
  if(NOT ARG_COMMAND)
    message(FATAL_ERROR "softrpma_add_run_test(${name}): COMMAND is required")
  endif()
  _softrpma_command(command ${ARG_COMMAND})
  _softrpma_sim_flags(flags)
  if(ARG_EXPECT_FAILURE)
    list(APPEND flags --expect-failure)
  endif()
  file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/softrpma-junit")
  add_test(NAME ${name}
           COMMAND "${SOFTRPMA_RPMA_SIM}" run --junit=${CMAKE_BINARY_DIR}/softrpma-junit/${name}.xml
                   ${flags} -- ${command})
  _softrpma_setup_test(${name} "softrpma;rpma-sim-run"
                       "Give softrpma_add_run_test EXPECT_FAILURE instead: both then agree.")
endfunction()

# softrpma_add_sweep_test(NAME COMMAND prog [args...] [SHARDS n] [JOBS n] [RUN_TIMEOUT t]
#                         [MAX_RUNS m] [POINTS p,...] [SEED s] [DEVICE d] [LEAKS])
# A test that runs `rpma-sim sweep -- prog args`: it fails when a run crashed or hung (or
# leaked, with LEAKS).
# With SHARDS n (n > 1), tests tied by CTest fixtures, so that `ctest -R NAME_merge` runs them
# all and `ctest -R NAME_shard_2_of_3` the plan and that shard:
#   NAME_plan           `sweep --plan-only`: the clean run, whose hit counts plan every shard
#                       (NAME.plan.json); the setup of fixture NAME_plan;
#   NAME_shard_K_of_n   `sweep --plan-from=NAME.plan.json --shard=K/n`, side by side under
#                       ctest -j; each requires NAME_plan and is a setup of NAME_shards. Each
#                       fails when one of its runs crashed or hung, with its replay lines;
#   NAME_merge          `report merge` of the shards' reports: the whole sweep's table and report
#                       (NAME.json, and NAME.xml beside it: every run in one JUnit file). It
#                       requires NAME_shards: CTest does not run it when a shard failed (it is
#                       counted failed, "Not Run"), nor when a shard's report is missing
#                       (REQUIRED_FILES: "Unable to find required file: ..._shard_K_of_n.json").
# softrpma-junit/ holds the plan's and the shards' JUnit files, so each run is in it once.
function(softrpma_add_sweep_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "LEAKS"
                        "SHARDS;JOBS;RUN_TIMEOUT;MAX_RUNS;POINTS;SEED;DEVICE" "COMMAND")
  if(NOT ARG_COMMAND)
    message(FATAL_ERROR "softrpma_add_sweep_test(${name}): COMMAND is required")
  endif()
  _softrpma_count(softrpma_add_sweep_test SHARDS 1 "SHARDS must be a number")
  _softrpma_command(command ${ARG_COMMAND})
  _softrpma_sim_flags(flags)
  foreach(pair "JOBS;-j=" "RUN_TIMEOUT;--timeout=" "MAX_RUNS;--max-runs=" "POINTS;--points=")
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
  set(labels "softrpma;rpma-sim-sweep")
  set(hint "A sweep fails when a run crashed or hung: WILL_FAIL hides that.")
  if(ARG_SHARDS EQUAL 1)
    add_test(NAME ${name}
             COMMAND "${SOFTRPMA_RPMA_SIM}" sweep ${flags} --report=${report_dir}/${name}.json
                     --junit=${junit_dir}/${name}.xml -- ${command})
    _softrpma_setup_test(${name} "${labels}" "${hint}")
    return()
  endif()
  set(plan "${report_dir}/${name}.plan.json")
  add_test(NAME ${name}_plan
           COMMAND "${SOFTRPMA_RPMA_SIM}" sweep ${flags} --plan-only --report=${plan}
                   --junit=${junit_dir}/${name}_plan.xml -- ${command})
  _softrpma_setup_test(${name}_plan "${labels}" "${hint}")
  set_tests_properties(${name}_plan PROPERTIES FIXTURES_SETUP ${name}_plan)
  set(shard_reports)
  foreach(k RANGE 1 ${ARG_SHARDS})
    set(shard ${name}_shard_${k}_of_${ARG_SHARDS})
    add_test(NAME ${shard}
             COMMAND "${SOFTRPMA_RPMA_SIM}" sweep ${flags} --plan-from=${plan}
                     --shard=${k}/${ARG_SHARDS} --report=${report_dir}/${shard}.json
                     --junit=${junit_dir}/${shard}.xml -- ${command})
    _softrpma_setup_test(${shard} "${labels}" "${hint}")
    set_tests_properties(${shard} PROPERTIES FIXTURES_REQUIRED ${name}_plan
                                             FIXTURES_SETUP ${name}_shards)
    list(APPEND shard_reports ${report_dir}/${shard}.json)
  endforeach()
  add_test(NAME ${name}_merge
           COMMAND "${SOFTRPMA_RPMA_SIM}" report merge --report=${report_dir}/${name}.json
                   --junit=${report_dir}/${name}.xml ${shard_reports})
  _softrpma_setup_test(${name}_merge "${labels}" "${hint}")
  set_tests_properties(${name}_merge PROPERTIES FIXTURES_REQUIRED ${name}_shards
                                                REQUIRED_FILES "${shard_reports}")
endfunction()

# softrpma_add_pair_test(NAME SERVER prog [args...] CLIENT prog [args...] [TIMEOUT seconds]
#                        [FAULTS spec] [SEED s] [DEVICE d])
# A test of a server and a client as two processes on the test's own fabric, under
# `rpma-sim run --junit=...` (with --faults, --seed, --device when given; each side has
# RPMA_SIM_ROLE=server or client, so a fault rule can name it: prog=server). softrpma-pair.sh
# starts the server, then the client as soon as the server listens; the test passes when both
# exit 0. When one fails or TIMEOUT seconds (default 60) pass, the other is stopped (SIGTERM to
# its process group, SIGKILL 3 s later), so no process of the test outlives it, and the last
# line of the output names the side that failed and how. Any fixed port is free: no other test
# is on the fabric. The words SERVER, CLIENT, TIMEOUT, FAULTS, SEED and DEVICE cannot be
# arguments of the programs.
function(softrpma_add_pair_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TIMEOUT;FAULTS;SEED;DEVICE" "SERVER;CLIENT")
  if(NOT ARG_SERVER OR NOT ARG_CLIENT)
    message(FATAL_ERROR "softrpma_add_pair_test(${name}): SERVER and CLIENT are required")
  endif()
  _softrpma_count(softrpma_add_pair_test TIMEOUT 60 "TIMEOUT must be a number of seconds")
  if(NOT EXISTS "${SOFTRPMA_PAIR_SCRIPT}")
    message(FATAL_ERROR "softrpma_add_pair_test(${name}): no ${SOFTRPMA_PAIR_SCRIPT} (a "
                        "softrpma tree older than the pair tests?)")
  endif()
  find_program(SOFTRPMA_BASH bash)
  if(NOT SOFTRPMA_BASH)
    message(FATAL_ERROR "softrpma_add_pair_test(${name}): bash is needed (softrpma-pair.sh)")
  endif()
  _softrpma_command(server ${ARG_SERVER})
  _softrpma_command(client ${ARG_CLIENT})
  list(LENGTH server server_words)
  _softrpma_sim_flags(flags)
  file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/softrpma-junit")
  add_test(NAME ${name}
           COMMAND "${SOFTRPMA_RPMA_SIM}" run --junit=${CMAKE_BINARY_DIR}/softrpma-junit/${name}.xml
                   ${flags} -- "${SOFTRPMA_BASH}" "${SOFTRPMA_PAIR_SCRIPT}" ${ARG_TIMEOUT}
                   ${server_words} ${server} ${client})
  _softrpma_setup_test(${name} "softrpma;rpma-sim-pair"
                       "A program that must fail belongs in softrpma_add_run_test(EXPECT_FAILURE).")
  # softrpma-pair.sh stops both sides after TIMEOUT; ctest's own limit is a backstop.
  math(EXPR ctest_timeout "${ARG_TIMEOUT} + 30")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ctest_timeout})
endfunction()
