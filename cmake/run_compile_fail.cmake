# Driver of one compile-fail test (see TenetCompileFail.cmake). Run as
#   cmake -DBUILD_DIR=<top build dir> -DTARGET=<object library> -DMODE=fail|pass
#         -DSOURCE=<snippet.cpp> [-DCONFIG=<config>] [-DEXPECT_FILE=<file>] -P run_compile_fail.cmake
# MODE=pass: the build of TARGET must succeed.
# MODE=fail: the build must fail, and every expected regex must match its output. The regexes are
# the `// EXPECT: <regex>` lines of SOURCE plus the lines of EXPECT_FILE, if given.
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS BUILD_DIR TARGET MODE SOURCE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_compile_fail.cmake: -D${var}=... is required")
  endif()
endforeach()

# English diagnostics with ASCII quotes, whatever the machine's locale, so regexes are portable.
set(ENV{LC_ALL} C)
set(ENV{LANG} C)

set(cmd "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}")
if(CONFIG)
  list(APPEND cmd --config "${CONFIG}")
endif()
# The same variable for both pipes: stdout and stderr are merged in the order produced.
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)

# Belt and braces: drop ANSI colour sequences in case a compiler or build tool adds them anyway.
string(ASCII 27 esc)
string(REGEX REPLACE "${esc}\\[[0-9;]*[A-Za-z]" "" output "${output}")

if(MODE STREQUAL "pass")
  if(NOT rc EQUAL 0)
    message("${output}")
    message(FATAL_ERROR
      "control build of ${SOURCE} (with TENET_COMPILE_FAIL_CONTROL defined) failed: the snippet "
      "must compile once its offending lines are disabled. Output above.")
  endif()
  message(STATUS "control build of ${SOURCE} succeeded")
  return()
elseif(NOT MODE STREQUAL "fail")
  message(FATAL_ERROR "run_compile_fail.cmake: MODE must be pass or fail, not '${MODE}'")
endif()

if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail to compile")
endif()

# Collect the expected regexes as single strings, never as CMake lists: a regex may well contain
# ';' or '[' (which list handling would split or treat specially). Hence the manual line loop.
#   _tenet_next_regex(<content-var> <line-var> <prefix>): pops lines off the front of <content-var>
#   up to and including the next one that starts with <prefix> and is longer than it; returns that
#   line without the prefix in <line-var>, or an empty string when there is none. With an empty
#   prefix this is simply the next non-empty line.
function(_tenet_next_regex content_var line_var prefix)
  set(content "${${content_var}}")
  set(found "")
  string(LENGTH "${prefix}" plen)
  while(NOT content STREQUAL "")
    string(FIND "${content}" "\n" nl)
    if(nl EQUAL -1)
      set(line "${content}")
      set(content "")
    else()
      string(SUBSTRING "${content}" 0 ${nl} line)
      math(EXPR rest "${nl} + 1")
      string(SUBSTRING "${content}" ${rest} -1 content)
    endif()
    string(REGEX REPLACE "\r$" "" line "${line}")
    string(LENGTH "${line}" llen)
    if(llen GREATER plen)
      string(SUBSTRING "${line}" 0 ${plen} head)
      if(head STREQUAL prefix)
        string(SUBSTRING "${line}" ${plen} -1 found)
        break()
      endif()
    endif()
  endwhile()
  set(${content_var} "${content}" PARENT_SCOPE)
  set(${line_var} "${found}" PARENT_SCOPE)
endfunction()

set(n_expected 0)
set(n_missing 0)
set(report "")
# Pass 1: the snippet's EXPECT lines; pass 2: the EXPECT_FILE (one regex a line, no prefix).
foreach(pass IN ITEMS source file)
  if(pass STREQUAL "source")
    file(READ "${SOURCE}" content)
    set(prefix "// EXPECT: ")
  elseif(EXPECT_FILE)
    file(READ "${EXPECT_FILE}" content)
    set(prefix "")
  else()
    continue()
  endif()
  while(TRUE)
    _tenet_next_regex(content re "${prefix}")
    if(re STREQUAL "")
      break()
    endif()
    string(STRIP "${re}" re)
    math(EXPR n_expected "${n_expected} + 1")
    string(REGEX MATCH "${re}" matched "${output}")
    if(matched STREQUAL "")
      math(EXPR n_missing "${n_missing} + 1")
      string(APPEND report "  NOT matched: ${re}\n")
    else()
      string(APPEND report "  matched:     ${re}\n")
    endif()
  endwhile()
endforeach()

if(n_expected EQUAL 0)
  message(FATAL_ERROR "${SOURCE}: no expected regex ('// EXPECT: <regex>' lines); nothing to check")
endif()
if(n_missing GREATER 0)
  message("${output}")
  message(FATAL_ERROR
    "${SOURCE} failed to compile as it should, but ${n_missing} of ${n_expected} expected "
    "regexes did not match the compiler output (above):\n${report}")
endif()
message(STATUS "${SOURCE} failed to compile as expected:\n${report}")
