# NIMBUS_GPU_ONLY=ON: the CUDA backend, ops, autodiff, graph mode, the nn
# layers, the trainer (compile / fit on tensors, callbacks), the strategies
# (NCCL over GPUs), monitoring without the HTTP exporter, the IDX reader, the
# CPU reference kernels, examples/fashion_mnist_fit, and the gpu / cuda-build
# tests and GPU benchmarks, for a machine that has only the CUDA toolkit, a
# compiler, CMake and ninja (and cuDNN / NCCL from pip): no oneDNN, yaml-cpp,
# image libraries, HTTP server or nimbus CLI (src/*/gpu_only/ say so).
# fmt, nlohmann_json, CLI11 and GoogleTest come from the system when it has them,
# else from third_party/, which scripts/vendor-gpu-deps fills from this machine's
# Debian packages (bench/gpu/run.sh and docs/cuda.md); so does zlib's header
# where the system has only the library (libz.so.1).
set(NIMBUS_THIRD_PARTY_DIR "${PROJECT_SOURCE_DIR}/third_party" CACHE PATH
    "Vendored fmt, nlohmann_json, CLI11, zlib's header, googletest")
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

find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE "${NIMBUS_THIRD_PARTY_DIR}/CLI11/include")
endif()

# zlib (gzip'd IDX files, TFRecord): the system's; where it has the library but not the header
# (no zlib1g-dev), the vendored header with the library.
find_package(ZLIB QUIET)
if(NOT ZLIB_FOUND)
  find_library(NIMBUS_LIBZ NAMES libz.so.1 z)
  if(NOT NIMBUS_LIBZ OR NOT EXISTS "${NIMBUS_THIRD_PARTY_DIR}/zlib/include/zlib.h")
    message(FATAL_ERROR "NIMBUS_GPU_ONLY: no zlib (libz.so.1 and zlib.h, or ${NIMBUS_THIRD_PARTY_DIR}/zlib): "
                        "install zlib1g, and run scripts/vendor-gpu-deps on a machine with Debian's packages")
  endif()
  add_library(ZLIB::ZLIB UNKNOWN IMPORTED)
  set_target_properties(ZLIB::ZLIB PROPERTIES IMPORTED_LOCATION "${NIMBUS_LIBZ}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NIMBUS_THIRD_PARTY_DIR}/zlib/include")
endif()

if(NIMBUS_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory("${NIMBUS_THIRD_PARTY_DIR}/googletest" "${CMAKE_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL)
  endif()
  include(GoogleTest)
endif()
message(STATUS "GPU-only build: CUDA backend, ops, autodiff, graph mode, nn layers, trainer, strategies (NCCL), "
               "monitoring, IDX data, reference CPU kernels, fashion_mnist_fit, gpu tests")
