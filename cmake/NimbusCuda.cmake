# The CUDA backend (src/device/cuda/, its kernels in src/kernels/cuda/): on by default when the toolkit is found,
# built against the CUDA runtime and libraries only, never the driver library
# (libcuda), so that nimbus starts on machines without an NVIDIA driver.
set(NIMBUS_CUDA_ROOT "/usr/local/cuda" CACHE PATH "Where the CUDA toolkit lives (bin/nvcc, include/, lib64/)")
if(EXISTS "${NIMBUS_CUDA_ROOT}/bin/nvcc" AND EXISTS "${NIMBUS_CUDA_ROOT}/include/cuda_runtime_api.h")
  set(nimbus_cuda_found ON)
else()
  set(nimbus_cuda_found OFF)
endif()
option(NIMBUS_CUDA "Build the CUDA backend (src/*/cuda; needs the CUDA toolkit)" ${nimbus_cuda_found})
# CMake's CUDA_ARCHITECTURES syntax: machine code (SASS) for sm_80 and sm_90, and
# PTX for compute capability 7.5, which the driver compiles once for any newer chip
# (T4, L4, L40S, Blackwell). CI builds one architecture: -DNIMBUS_CUDA_ARCHS=80-real.
set(NIMBUS_CUDA_ARCHS "80-real;90-real;75-virtual" CACHE STRING "CUDA architectures the .cu files are compiled for")

if(NIMBUS_GPU_ONLY AND NOT nimbus_cuda_found)
  message(FATAL_ERROR "NIMBUS_GPU_ONLY needs the CUDA toolkit: no nvcc under ${NIMBUS_CUDA_ROOT} (set -DNIMBUS_CUDA_ROOT)")
elseif(NIMBUS_GPU_ONLY)
  set(NIMBUS_CUDA ON CACHE BOOL "" FORCE)
endif()
if(NOT NIMBUS_CUDA)
  if(NOT nimbus_cuda_found)
    message(STATUS "CUDA backend: off (no nvcc and cuda_runtime_api.h under ${NIMBUS_CUDA_ROOT}; "
                   "set -DNIMBUS_CUDA_ROOT=<toolkit> to build it)")
  else()
    message(STATUS "CUDA backend: off (-DNIMBUS_CUDA=OFF)")
  endif()
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER "${NIMBUS_CUDA_ROOT}/bin/nvcc")
endif()
set(CUDAToolkit_ROOT "${NIMBUS_CUDA_ROOT}")
set(CMAKE_CUDA_ARCHITECTURES ${NIMBUS_CUDA_ARCHS})
# The .cu files see only C++17 headers (src/device/cuda/kernels/kernels.h); CMake 3.25
# does not know that nvcc 13 speaks C++20 anyway.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# The shared runtime, like the libraries (cuBLAS, cuDNN) that load it too.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
if(CCACHE_PROGRAM)
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${CCACHE_PROGRAM}" CACHE STRING "")
endif()
enable_language(CUDA)
# Debian 12's CMake (3.25.1) marks CUDA::nvToolsExt deprecated without checking that the target
# exists, which fails the configure with CUDA 13 (no libnvToolsExt) on a machine whose CMake module
# nobody patched; later CMake checks first. It does so only for projects that require CMake 3.25 or
# later, so the find runs with the minimum version read as 3.24.
if(CMAKE_VERSION VERSION_LESS 3.26)
  set(nimbus_minimum_required ${CMAKE_MINIMUM_REQUIRED_VERSION})
  set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
endif()
find_package(CUDAToolkit REQUIRED)
if(DEFINED nimbus_minimum_required)
  set(CMAKE_MINIMUM_REQUIRED_VERSION ${nimbus_minimum_required})
endif()

# cuDNN comes with the toolkit here and from pip (nvidia-cudnn-cu13) on the GPU
# machines: -DNIMBUS_CUDNN_ROOT=<site-packages>/nvidia/cudnn.
set(NIMBUS_CUDNN_ROOT "" CACHE PATH "A cuDNN folder with include/ and lib/ (empty: the toolkit's)")
find_path(NIMBUS_CUDNN_INCLUDE_DIR cudnn.h HINTS ${NIMBUS_CUDNN_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
# NAMES_PER_DIR: pip's folder (libcudnn.so.9 alone, no libcudnn.so) wins over a toolkit that has cuDNN too.
find_library(NIMBUS_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR
             HINTS ${NIMBUS_CUDNN_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
# Headers only: libnimbus loads cuDNN on first use (src/device/cuda/lazy_libraries.h), from this folder
# when the loader's search path does not have it.
add_library(nimbus_cudnn INTERFACE)
target_include_directories(nimbus_cudnn INTERFACE ${NIMBUS_CUDNN_INCLUDE_DIR})
get_filename_component(NIMBUS_CUDNN_LIBRARY_DIR "${NIMBUS_CUDNN_LIBRARY}" DIRECTORY)
# NCCL is loaded at run time (src/device/cuda/nccl_library.h); PyTorch's wheels bring pip's
# nvidia-nccl-cu13, whose folder the python3 on PATH names (empty when it has none).
find_program(NIMBUS_PYTHON3 NAMES python3)
set(NIMBUS_NCCL_PIP_DIR "")
if(NIMBUS_PYTHON3)
  execute_process(
    COMMAND ${NIMBUS_PYTHON3} -c "import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], 'lib'))"
    OUTPUT_VARIABLE NIMBUS_NCCL_PIP_DIR OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
message(STATUS "CUDA backend: on (CUDA ${CUDAToolkit_VERSION}, architectures ${NIMBUS_CUDA_ARCHS}, cuDNN ${NIMBUS_CUDNN_LIBRARY})")
