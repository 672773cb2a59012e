# tenet_cuda_interface(<target>): makes the INTERFACE library <target> what tenet::cuda is:
# tenet::tenet plus what CUDA translation units need (the CUDA runtime, cuBLASLt and the nvcc flags
# tenet's headers require: fmt 9's format strings in C++20, constexpr calls from device code, no
# warning for Eigen's defaulted host/device functions). Used by the build tree (tenet_cuda) and by
# the installed package (the imported tenet::cuda of find_package(tenet COMPONENTS cuda)); both
# need CUDAToolkit found first.
function(tenet_cuda_interface target)
  target_link_libraries(${target} INTERFACE tenet::tenet CUDA::cudart CUDA::cublasLt)
  # CUDA sources record gradients as C++ ones do (TENET_AUTOGRAD defaults to 1; docs/cuda.md).
  target_compile_definitions(${target} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:FMT_USE_CONSTEXPR=1>)
  target_compile_options(${target} INTERFACE
    # -std=c++20 by hand: CMake 3.25 does not know nvcc 13's CUDA20 flag (CMAKE_CUDA_STANDARD fails)
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr -diag-suppress=20012,1675,186 -Xcompiler=-fopenmp>)
endfunction()
