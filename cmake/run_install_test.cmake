# Driver of the `install_consumer` test. Run as
#   cmake -DSETTINGS=<install_test_settings.cmake> [-DCONFIG=<config>] -P run_install_test.cmake
# SETTINGS (written by tests/CMakeLists.txt at configure time) sets the TENET_IT_* variables below.
#
#  1. cmake --install <build dir> into a fresh prefix;
#  2. configure tests/install_consumer against that prefix (same generator, compiler and flags,
#     CMAKE_PREFIX_PATH = prefix + the main build's prefix path, TENET_DEPS_DIR forwarded), and
#     check that tenet was found in the prefix, not somewhere else;
#  3. build it (with TENET_IT_DIST also a program against tenet::dist: built, not run, as it needs mpirun);
#  4. run the program it produced, which must exit with 0;
#  5. with TENET_IT_CUDA, run its CUDA program too (exit 0; 77 where there is no GPU).
cmake_minimum_required(VERSION 3.25)

if(NOT SETTINGS OR NOT EXISTS "${SETTINGS}")
  message(FATAL_ERROR "run_install_test.cmake: -DSETTINGS=<file> is required")
endif()
include("${SETTINGS}")

set(prefix "${TENET_IT_BINARY_DIR}/install_test_prefix")
set(consumer_build "${TENET_IT_BINARY_DIR}/install_consumer_build")
set(config_args "")
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

# Runs a command, prints its output, stops with <what> if it fails.
function(_tenet_run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (exit ${rc})")
  endif()
endfunction()

# 1. Install into a clean prefix, so headers deleted since the last run cannot linger.
file(REMOVE_RECURSE "${prefix}" "${consumer_build}")
_tenet_run("cmake --install"
  "${CMAKE_COMMAND}" --install "${TENET_IT_BINARY_DIR}" --prefix "${prefix}" ${config_args})

# 2. Configure the consumer. Settings go through an initial-cache file (-C) rather than -D
#    arguments, so lists (';') and paths with spaces arrive intact.
set(init "${TENET_IT_BINARY_DIR}/install_consumer_init.cmake")
set(prefix_path "${prefix}")
if(TENET_IT_DEPS_DIR)
  list(APPEND prefix_path "${TENET_IT_DEPS_DIR}")
endif()
list(APPEND prefix_path ${TENET_IT_PREFIX_PATH})
list(REMOVE_DUPLICATES prefix_path)
set(cache "")
foreach(pair IN ITEMS
    "CMAKE_PREFIX_PATH|prefix_path"
    "TENET_DEPS_DIR|TENET_IT_DEPS_DIR"
    "CMAKE_CXX_COMPILER|TENET_IT_CXX_COMPILER"
    "CMAKE_CXX_FLAGS|TENET_IT_CXX_FLAGS"
    "CMAKE_MAKE_PROGRAM|TENET_IT_MAKE_PROGRAM"
    "CMAKE_TOOLCHAIN_FILE|TENET_IT_TOOLCHAIN_FILE"
    "CMAKE_BUILD_TYPE|CONFIG"
    "TENET_IT_CUDA|TENET_IT_CUDA"
    "TENET_IT_DIST|TENET_IT_DIST"
    "CMAKE_CUDA_COMPILER|TENET_IT_CUDA_COMPILER"
    "CMAKE_CUDA_ARCHITECTURES|TENET_IT_CUDA_ARCHITECTURES")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 cache_var)
  list(GET pair 1 value_var)
  if(NOT "${${value_var}}" STREQUAL "")
    string(APPEND cache "set(${cache_var} [==[${${value_var}}]==] CACHE STRING \"\" FORCE)\n")
  endif()
endforeach()
# Find tenet only where the test put it: no user or system package registry.
string(APPEND cache "set(CMAKE_FIND_USE_PACKAGE_REGISTRY OFF CACHE BOOL \"\" FORCE)\n")
string(APPEND cache "set(CMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY OFF CACHE BOOL \"\" FORCE)\n")
file(WRITE "${init}" "${cache}")

set(generator_args -G "${TENET_IT_GENERATOR}")
if(TENET_IT_GENERATOR_PLATFORM)
  list(APPEND generator_args -A "${TENET_IT_GENERATOR_PLATFORM}")
endif()
if(TENET_IT_GENERATOR_TOOLSET)
  list(APPEND generator_args -T "${TENET_IT_GENERATOR_TOOLSET}")
endif()
_tenet_run("configuring the consumer"
  "${CMAKE_COMMAND}" ${generator_args} -C "${init}"
  -S "${TENET_IT_CONSUMER_SOURCE}" -B "${consumer_build}")

# The consumer must have used the package just installed.
file(STRINGS "${consumer_build}/CMakeCache.txt" tenet_dir_line REGEX "^tenet_DIR:")
string(REGEX REPLACE "^tenet_DIR:[A-Z]*=" "" tenet_dir "${tenet_dir_line}")
file(REAL_PATH "${prefix}" real_prefix)
if(tenet_dir STREQUAL "" OR NOT EXISTS "${tenet_dir}")
  message(FATAL_ERROR "install test: the consumer's cache has no usable tenet_DIR ('${tenet_dir}')")
endif()
file(REAL_PATH "${tenet_dir}" real_tenet_dir)
string(FIND "${real_tenet_dir}/" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install test: tenet was found in ${tenet_dir}, not in the test prefix ${prefix}")
endif()

# 3. Build.
_tenet_run("building the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" ${config_args})

# Runs the consumer's program <name> (through the cross-compiling emulator if there is one, e.g.
# qemu for aarch64), prints its output and sets <rc_var> to its exit code.
function(_tenet_run_consumer name rc_var)
  set(exe "${consumer_build}/bin/${name}${TENET_IT_EXE_SUFFIX}")
  if(NOT EXISTS "${exe}")
    message(FATAL_ERROR "install test: ${exe} was not built")
  endif()
  execute_process(COMMAND ${TENET_IT_EMULATOR} "${exe}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()

# 4. Run the program: exit 0.
_tenet_run_consumer(tenet_install_consumer rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install test: tenet_install_consumer exited with ${rc}, expected 0")
endif()
# 5. The CUDA program (TENET_IT_CUDA): exit 0 on a GPU; 77 where there is none (built, not run).
if(TENET_IT_CUDA)
  _tenet_run_consumer(tenet_install_consumer_cuda rc)
  if(rc EQUAL 77)
    message(STATUS "install test: the CUDA consumer built against tenet::cuda of ${prefix}; no GPU here, not run")
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: tenet_install_consumer_cuda exited with ${rc}, expected 0 (or 77 without a GPU)")
  endif()
endif()
message(STATUS "install test: consumer built against ${prefix} and ran successfully")
