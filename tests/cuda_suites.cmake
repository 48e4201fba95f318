# The CUDA backend's suites. cuda-build: what runs without a GPU (check macros,
# the no-driver errors, NVRTC compiling every fused program of the MLP and CNN
# steps). gpu: every CUDA op against the CPU reference (the op cases of
# tests/core), skipping with the reason when no GPU is present.
nimbus_test_suite(cuda cuda-build CUDA::cudart CUDA::nvrtc nimbus_cudnn)
target_compile_definitions(test_cuda PRIVATE NIMBUS_LIBRARY="$<TARGET_FILE:nimbus>")
# The CLI checks run the nimbus binary, which a GPU-only build does not have.
if(TARGET nimbus_cli)
  add_dependencies(test_cuda nimbus_cli)
  target_compile_definitions(test_cuda PRIVATE NIMBUS_CLI="$<TARGET_FILE:nimbus_cli>")
endif()
if(NIMBUS_GPU_ONLY)
  target_sources(test_cuda PRIVATE ${NIMBUS_TESTS_DIR}/core/fast_kernel_list_test.cc)
endif()
file(GLOB op_case_sources CONFIGURE_DEPENDS ${NIMBUS_TESTS_DIR}/core/cases_*.cc)
nimbus_test_suite(gpu gpu CUDA::cudart)
target_sources(test_gpu PRIVATE ${op_case_sources} ${NIMBUS_TESTS_DIR}/core/op_harness.cc)
target_include_directories(test_gpu PRIVATE ${NIMBUS_TESTS_DIR}/core)
# Where the toolkit's libraries are (tests/cuda/nccl_library_test.cc looks for its NCCL there).
set_source_files_properties(${NIMBUS_TESTS_DIR}/cuda/nccl_library_test.cc PROPERTIES
  COMPILE_DEFINITIONS NIMBUS_CUDA_LIBRARY_DIR="${CUDAToolkit_LIBRARY_DIR}")
