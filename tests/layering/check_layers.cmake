# The layering test: reads every `#include <tenet/...>` line of include/ and detail/ and fails on
# one that goes against the layer order (docs/design.md, "Layers"), or from detail/ into a public
# op header. Run: cmake -DROOT=<repository> -P tests/layering/check_layers.cmake
#
# Layers, lowest first. A header may include headers of its own layer and of the layers below it.
#   base      config, detail_check, fast_divisor, runtime/ (storage, half, philox, grad mode),
#             io/ and the public value types: error, dtype, device, shape, autocast
#   shape     shape/                       static/dynamic/symbolic shape rules
#   expr      expr/, tensor/, tenet/tensor.hpp: expression nodes, their leaf the Tensor, shared
#             values and CSE keys
#   prims     prims/ (not the rules)       the closed prim set: shape/dtype rule and apply
#   decomp    decomp/                      ATen-level composites and decompose_t
#   autograd  autograd/, prims/*rules.hpp  the engine and each prim group's VJP/JVP rules
#   schedule  schedule/                    fusion decisions and the one lowering walk
#   backend   backend/                     the backends' run functions (cpu/, cuda/) and evaluate
#   debug     debug/                       explain and the kernel plan
#   api       api/, dist/ and every other public header (include/tenet/*): the API users include
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_layers.cmake: pass -DROOT=<repository root>")
endif()

set(LAYERS base shape expr prims decomp autograd schedule backend debug api)
# Matched in this order (the first match names a file's layer).
set(MATCH_ORDER base shape expr autograd prims decomp schedule backend debug api)
set(RE_base "^detail/tenet/(config|detail_check|fast_divisor)\\.hpp$|^detail/tenet/(runtime|io)/|^include/tenet/(error|dtype|device|shape|autocast)\\.hpp$")
set(RE_shape "^detail/tenet/shape/")
set(RE_expr "^detail/tenet/(expr|tensor)/|^include/tenet/tensor\\.hpp$")
set(RE_autograd "^detail/tenet/autograd/|^detail/tenet/prims/([a-z_]*_)?rules\\.hpp$")
set(RE_prims "^detail/tenet/prims/")
set(RE_decomp "^detail/tenet/decomp/")
set(RE_schedule "^detail/tenet/schedule/")
set(RE_backend "^detail/tenet/backend/")
set(RE_debug "^detail/tenet/debug/")
set(RE_api "^detail/tenet/(api|dist)/|^include/tenet/")

function(layer_of path out)
  foreach(name IN LISTS MATCH_ORDER)
    if(path MATCHES "${RE_${name}}")
      list(FIND LAYERS ${name} rank)
      set(${out} ${rank} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} -1 PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${ROOT}" "${ROOT}/include/*.hpp" "${ROOT}/include/*.cuh"
     "${ROOT}/detail/*.hpp" "${ROOT}/detail/*.cuh")
list(LENGTH LAYERS top)
math(EXPR top "${top} - 1")
set(errors "")
set(count 0)
foreach(f IN LISTS files)
  layer_of("${f}" from)
  if(from EQUAL -1)
    string(APPEND errors "\n  ${f}: in no layer (add its folder to tests/layering/check_layers.cmake and docs/design.md)")
    continue()
  endif()
  list(GET LAYERS ${from} from_name)
  file(STRINGS "${ROOT}/${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*<tenet/[^>]+>")
  foreach(line IN LISTS lines)
    math(EXPR count "${count} + 1")
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*<(tenet/[^>]+)>.*$" "\\1" inc "${line}")
    if(EXISTS "${ROOT}/include/${inc}")
      set(to_path "include/${inc}")
    elseif(EXISTS "${ROOT}/detail/${inc}")
      set(to_path "detail/${inc}")
    else()
      string(APPEND errors "\n  ${f}: includes <${inc}>, which is not in include/ or detail/")
      continue()
    endif()
    layer_of("${to_path}" to)
    list(GET LAYERS ${to} to_name)
    if(to GREATER from)
      string(APPEND errors "\n  ${f} (${from_name}) includes ${to_path} (${to_name}): against the layer order")
    elseif(to EQUAL top AND f MATCHES "^detail/" AND to_path MATCHES "^include/")
      string(APPEND errors "\n  ${f}: includes the public op header ${to_path} (detail/ depends on no public op header)")
    endif()
  endforeach()
endforeach()

list(LENGTH files nfiles)
if(errors)
  message(FATAL_ERROR "tenet layering: ${nfiles} headers, ${count} includes; these go against the order:${errors}")
endif()
message(STATUS "tenet layering: ${nfiles} headers, ${count} includes, all in layer order")
