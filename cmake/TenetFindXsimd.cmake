# tenet_find_xsimd([REQUIRED])
#
# Provides the target `xsimd` (the name xsimd's own package config uses).
#  1. find_package(xsimd CONFIG) — the normal case (Debian's libxsimd-dev ships a config; its
#     dangling link to `xtl` is removed when xtl is not installed).
#  2. Otherwise look for the header xsimd/xsimd.hpp, in TENET_DEPS_DIR first (a flat folder of
#     copied headers, or one with an include/ subfolder), then the usual prefixes, and wrap it in
#     an INTERFACE IMPORTED target. xsimd is header-only, so that is all a consumer needs.
#
# Used by tenet's CMakeLists.txt and by the installed tenetConfig.cmake, so both find xsimd the
# same way. Sets xsimd_FOUND.
function(tenet_find_xsimd)
  cmake_parse_arguments(PARSE_ARGV 0 arg "REQUIRED" "" "")
  if(TARGET xsimd)
    set(xsimd_FOUND TRUE PARENT_SCOPE)
    return()
  endif()

  find_package(xsimd CONFIG QUIET)
  if(xsimd_FOUND AND TARGET xsimd)
    # Debian's xsimd 8 was built with xtl support: its target links `xtl` but its config never
    # looks for xtl, so without libxtl-dev a link line gets a bogus -lxtl. xtl is only used when
    # XSIMD_ENABLE_XTL_COMPLEX is defined, which tenet never does: drop it unless xtl is there.
    get_target_property(_links xsimd INTERFACE_LINK_LIBRARIES)
    if(_links AND "xtl" IN_LIST _links AND NOT TARGET xtl)
      find_package(xtl CONFIG QUIET)
      if(NOT TARGET xtl)
        list(REMOVE_ITEM _links xtl)
        set_target_properties(xsimd PROPERTIES INTERFACE_LINK_LIBRARIES "${_links}")
      endif()
    endif()
    set(xsimd_FOUND TRUE PARENT_SCOPE)
    return()
  endif()

  set(_hints "")
  if(TENET_DEPS_DIR)
    list(APPEND _hints "${TENET_DEPS_DIR}" "${TENET_DEPS_DIR}/include")
  endif()
  find_path(TENET_XSIMD_INCLUDE_DIR xsimd/xsimd.hpp
    HINTS ${_hints}
    DOC "Folder holding xsimd/xsimd.hpp (used when no xsimdConfig.cmake is found)")
  if(TENET_XSIMD_INCLUDE_DIR)
    add_library(xsimd INTERFACE IMPORTED)
    set_target_properties(xsimd PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${TENET_XSIMD_INCLUDE_DIR}")
    if(NOT tenet_FIND_QUIETLY)
      message(STATUS "xsimd: no package config; using headers in ${TENET_XSIMD_INCLUDE_DIR}")
    endif()
    set(xsimd_FOUND TRUE PARENT_SCOPE)
  elseif(arg_REQUIRED)
    message(FATAL_ERROR
      "xsimd not found: install libxsimd-dev, or pass -DTENET_DEPS_DIR=<folder holding xsimd/>")
  else()
    set(xsimd_FOUND FALSE PARENT_SCOPE)
  endif()
endfunction()
