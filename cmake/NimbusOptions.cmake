# Build options shared by every target.
option(NIMBUS_BUILD_TESTS "Build the GoogleTest suite" ON)
option(NIMBUS_BUILD_BENCHMARKS "Build the Google Benchmark programs" ON)
# NIMBUS_CUDA and NIMBUS_CUDA_ARCHS: cmake/NimbusCuda.cmake.
option(NIMBUS_GPU_ONLY "Only what a GPU machine without Debian's packages can build (cmake/NimbusGpuOnly.cmake)" OFF)
option(NIMBUS_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
# The libFuzzer targets in fuzz/ (clang only: the `fuzz` preset).
option(NIMBUS_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/" OFF)

# x86-64-v3 (AVX2, FMA, F16C) is the baseline of every cloud CPU we target;
# oneDNN picks wider instruction sets itself at run time.
set(NIMBUS_ARCH_FLAGS "-march=x86-64-v3" CACHE STRING "Target-architecture flags for our own kernels")
if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(NIMBUS_ARCH_FLAGS "" CACHE STRING "" FORCE)
endif()

add_library(nimbus_build_flags INTERFACE)
# -Wno-psabi: the CPU kernels' 64-byte vectors only pass between always_inline
# functions (src/kernels/cpu/simd.h), never across a call, so GCC's notes that
# their calling convention differs without AVX-512 do not apply.
# -Wno-missing-field-initializers: designated initializers that leave members
# at their defaults (`FunctionOptions{.jit = true}`) are the house style, and
# GCC 12 warns for every member they leave out.
# C and C++ only: nvcc compiles the .cu files with its own flags (cmake/NimbusCuda.cmake).
target_compile_options(nimbus_build_flags INTERFACE
  "$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra;-Wno-unused-parameter;-Wno-missing-field-initializers;-Wno-psabi;$<$<CONFIG:Release>:-O3>;${NIMBUS_ARCH_FLAGS}>")
if(NIMBUS_SANITIZE)
  target_compile_options(nimbus_build_flags INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(nimbus_build_flags INTERFACE -fsanitize=address,undefined)
endif()
