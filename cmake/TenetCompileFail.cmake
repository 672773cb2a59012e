# Compile-fail tests: code that must NOT compile, with the diagnostic it must produce.
#
#   tenet_add_compile_fail_test(NAME <test-name> SOURCE <file.cpp> [REGEX <regex>...]
#                               [LINK_LIBRARIES <target>...])
#   tenet_add_compile_fail_tests(DIRECTORY <dir> [PREFIX <prefix>])   # one per <dir>/*.cpp
#
# A snippet is one .cpp file that includes tenet and puts its offending line(s) inside
#   #ifndef TENET_COMPILE_FAIL_CONTROL ... #endif
# and states what the compiler must say in comment lines, each a CMake regular expression
# (https://cmake.org/cmake/help/latest/command/string.html#regex-specification):
#   // EXPECT: cannot broadcast shape<64, ?784> with shape<10, ?784>
# A snippet may also name macros that only its failing build defines on the command line, as a
# user's build would (a #define in the file would come after the precompiled tenet.hpp: too late):
#   // DEFINE: TENET_CPU_KERNELS=0
# such a snippet is built without the precompiled header. Regexes given with REGEX are checked in
# addition to the EXPECT lines. The EXPECT lines are read
# from the file when the test runs, so editing them needs no re-configure. Diagnostics are produced
# without colours and without the echoed source line (so a regex cannot match the snippet's or the
# header's own text shown under a caret, only the diagnostic itself).
#
# Each snippet gives two CTest tests, both labelled `compile_fail`:
#   <test-name>_control  builds the snippet with -DTENET_COMPILE_FAIL_CONTROL; must succeed, which
#                        proves the snippet is otherwise valid (no typo, missing include, ...);
#   <test-name>          builds it as is; must fail, and every regex must match the build output.
# Each build is of an OBJECT library excluded from `all`, run with `cmake --build <top build dir>
# --target <it>` by cmake/run_compile_fail.cmake. Those tests share a RESOURCE_LOCK so that
# `ctest -j` never runs two build-tool processes in the same build tree at once.
include_guard(GLOBAL)

set(_TENET_CF_DRIVER "${CMAKE_CURRENT_LIST_DIR}/run_compile_fail.cmake")

function(tenet_add_compile_fail_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;SOURCE" "REGEX;LINK_LIBRARIES")
  if(NOT arg_NAME OR NOT arg_SOURCE)
    message(FATAL_ERROR "tenet_add_compile_fail_test: NAME and SOURCE are required")
  endif()
  get_filename_component(src "${arg_SOURCE}" ABSOLUTE)
  if(NOT EXISTS "${src}")
    message(FATAL_ERROR "tenet_add_compile_fail_test(${arg_NAME}): no file ${src}")
  endif()

  # Refuse a snippet with nothing to check: it would pass on any error at all.
  file(STRINGS "${src}" expect_lines REGEX "^// EXPECT: ")
  if(NOT arg_REGEX AND NOT expect_lines)
    message(FATAL_ERROR "compile-fail snippet ${src} has no '// EXPECT: <regex>' line")
  endif()

  file(STRINGS "${src}" defines REGEX "^// DEFINE: ")
  list(TRANSFORM defines REPLACE "^// DEFINE: " "")

  string(MAKE_C_IDENTIFIER "${arg_NAME}" id)
  set(fail_target tenet_cf_${id})
  set(control_target tenet_cf_${id}_control)
  foreach(t IN ITEMS ${fail_target} ${control_target})
    add_library(${t} OBJECT EXCLUDE_FROM_ALL "${src}")
    if(TARGET tenet_cf_pch AND NOT defines)
      # tenet.hpp parsed once for all snippets (see tenet_add_compile_fail_tests)
      target_precompile_headers(${t} REUSE_FROM tenet_cf_pch)
    endif()
    set_target_properties(${t} PROPERTIES EXCLUDE_FROM_DEFAULT_BUILD ON)
    target_link_libraries(${t} PRIVATE tenet::tenet ${arg_LINK_LIBRARIES})
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${t} PRIVATE -fdiagnostics-color=never -fno-diagnostics-show-caret)
    elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      target_compile_options(${t} PRIVATE -fno-color-diagnostics -fno-caret-diagnostics)
    endif()
    if(NOT MSVC)
      # Only diagnostics matter: compile as fast as possible. -march=native as for the tests, so
      # that the same SIMD code paths are instantiated. -fsyntax-only: every template is still
      # instantiated (where tenet's static errors fire) but no code is generated, which halves a
      # control build (17 s to 10 s for a matmul); ninja accepts the object it never gets.
      target_compile_options(${t} PRIVATE -O0 -g0)
      if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR CMAKE_CXX_COMPILER_ID MATCHES "Clang")
        target_compile_options(${t} PRIVATE -fsyntax-only)
      endif()
      if(TENET_USE_MARCH_NATIVE)
        target_compile_options(${t} PRIVATE -march=native)
      endif()
    endif()
  endforeach()
  target_compile_definitions(${control_target} PRIVATE TENET_COMPILE_FAIL_CONTROL)
  if(defines)
    target_compile_definitions(${fail_target} PRIVATE ${defines})
  endif()

  # Regexes passed as arguments go to a file, one a line, so that the driver never has to pass
  # them through a command line (CMake lists and shells both mangle ';', '[' and quotes).
  set(expect_file "")
  if(arg_REGEX)
    set(expect_file "${CMAKE_CURRENT_BINARY_DIR}/compile_fail/${id}.expect")
    set(content "")
    foreach(re IN LISTS arg_REGEX)
      string(APPEND content "${re}\n")
    endforeach()
    file(WRITE "${expect_file}" "${content}")
  endif()

  set(common
    -DBUILD_DIR=${CMAKE_BINARY_DIR}
    -DCONFIG=$<CONFIG>
    -DSOURCE=${src}
    -DEXPECT_FILE=${expect_file})
  add_test(NAME ${arg_NAME}_control
    COMMAND ${CMAKE_COMMAND} ${common} -DTARGET=${control_target} -DMODE=pass -P ${_TENET_CF_DRIVER})
  add_test(NAME ${arg_NAME}
    COMMAND ${CMAKE_COMMAND} ${common} -DTARGET=${fail_target} -DMODE=fail -P ${_TENET_CF_DRIVER})
  set_tests_properties(${arg_NAME}_control ${arg_NAME} PROPERTIES
    LABELS compile_fail
    RESOURCE_LOCK tenet_build_tree
    TIMEOUT 600)
  # Ordering only: run the control first, so its result is at hand when reading the other.
  set_tests_properties(${arg_NAME} PROPERTIES DEPENDS ${arg_NAME}_control)
endfunction()

function(tenet_add_compile_fail_tests)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "DIRECTORY;PREFIX" "")
  if(NOT DEFINED arg_PREFIX)
    set(arg_PREFIX "compile_fail.")
  endif()
  # One precompiled tenet.hpp, built with the snippets' flags, that every snippet reuses: each
  # snippet then costs its own instantiations only (it parsed the whole library before).
  if(NOT TARGET tenet_cf_pch AND NOT MSVC)
    set(pch_src "${CMAKE_CURRENT_BINARY_DIR}/compile_fail/tenet_cf_pch.cpp")
    file(CONFIGURE OUTPUT "${pch_src}" CONTENT "// the compile-fail snippets' precompiled header\n")
    add_library(tenet_cf_pch OBJECT EXCLUDE_FROM_ALL "${pch_src}")
    target_link_libraries(tenet_cf_pch PRIVATE tenet::tenet)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(tenet_cf_pch PRIVATE -fdiagnostics-color=never -fno-diagnostics-show-caret)
    elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      target_compile_options(tenet_cf_pch PRIVATE -fno-color-diagnostics -fno-caret-diagnostics)
    endif()
    target_compile_options(tenet_cf_pch PRIVATE -O0 -g0)
    if(TENET_USE_MARCH_NATIVE)
      target_compile_options(tenet_cf_pch PRIVATE -march=native)
    endif()
    target_precompile_headers(tenet_cf_pch PRIVATE <tenet/tenet.hpp>)
  endif()
  file(GLOB snippets CONFIGURE_DEPENDS "${arg_DIRECTORY}/*.cpp")
  list(SORT snippets)
  foreach(snippet IN LISTS snippets)
    get_filename_component(stem "${snippet}" NAME_WLE)
    tenet_add_compile_fail_test(NAME ${arg_PREFIX}${stem} SOURCE "${snippet}")
  endforeach()
endfunction()
