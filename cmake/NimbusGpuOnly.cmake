# NIMBUS_GPU_ONLY=ON: the CUDA backend, ops, autodiff, graph mode, the nn
# layers (Keras's layers and models, which the mixed-precision benchmarks
# build their models from), the CPU reference kernels, and the gpu /
# cuda-build tests and GPU benchmarks, for a
# machine that has only the CUDA toolkit, a compiler, CMake and ninja (and cuDNN
# from pip): no oneDNN, yaml-cpp, image libraries, HTTP server or CLI.
# fmt, nlohmann_json and GoogleTest come from the system when it has them, else
# from third_party/, which scripts/vendor-gpu-deps fills from this machine's
# Debian packages (bench/gpu/run.sh and docs/cuda.md).
set(NIMBUS_THIRD_PARTY_DIR "${PROJECT_SOURCE_DIR}/third_party" CACHE PATH "Vendored fmt, nlohmann_json, googletest")
set(NIMBUS_BUILD_BENCHMARKS OFF CACHE BOOL "" FORCE)  # Google Benchmark is not there; bench/gpu needs none

find_package(OpenMP REQUIRED)
find_package(Threads REQUIRED)

find_package(fmt CONFIG QUIET)
if(NOT fmt_FOUND)
  if(NOT EXISTS "${NIMBUS_THIRD_PARTY_DIR}/fmt/include/fmt/format.h")
    message(FATAL_ERROR "NIMBUS_GPU_ONLY: no fmt on this system nor in ${NIMBUS_THIRD_PARTY_DIR}/fmt: "
                        "run scripts/vendor-gpu-deps on a machine with Debian's packages and bring third_party/ along")
  endif()
  add_library(fmt::fmt INTERFACE IMPORTED)
  target_include_directories(fmt::fmt INTERFACE "${NIMBUS_THIRD_PARTY_DIR}/fmt/include")
  target_compile_definitions(fmt::fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

find_package(nlohmann_json CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE "${NIMBUS_THIRD_PARTY_DIR}/nlohmann/include")
endif()

if(NIMBUS_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory("${NIMBUS_THIRD_PARTY_DIR}/googletest" "${CMAKE_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL)
  endif()
  include(GoogleTest)
endif()
message(STATUS "GPU-only build: CUDA backend, ops, autodiff, graph mode, nn layers, reference CPU kernels, gpu tests")
