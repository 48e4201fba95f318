// NCCL's C API as the CUDA backend uses it, loaded with dlopen on first use
// (nimbus/device/nccl.h says where from). The few types and functions are declared
// here rather than taken from nccl.h, which the toolkit does not always ship (pip's
// nvidia-nccl-cu13 has its own, elsewhere); they are NCCL 2's stable ABI.
//
//   const NcclApi& api = nccl();   // throws Unavailable (nccl_status()'s reason and remedy) when not found
//   NIMBUS_NCCL_CHECK(api.ncclAllReduce(buffer, buffer, count, kNcclFloat32, kNcclSum, comm, stream));
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "nimbus/device/nccl.h"

namespace nimbus::cuda {

// nccl.h's ncclComm_t, ncclUniqueId, ncclResult_t, ncclDataType_t and ncclRedOp_t.
using NcclComm = struct ncclComm*;
struct NcclUniqueId {
  char internal[128];
};
using NcclResult = int;
constexpr NcclResult kNcclSuccess = 0;
constexpr NcclResult kNcclInProgress = 7;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclUint8 = 1;
constexpr int kNcclSum = 0;

// One X(return type, name, parameters) per function (clang-format would reflow the list).
// clang-format off
#define NIMBUS_NCCL_FUNCTIONS(X) \
  X(NcclResult, ncclGetVersion, (int* version)) \
  X(const char*, ncclGetErrorString, (NcclResult result)) \
  X(const char*, ncclGetLastError, (NcclComm comm)) \
  X(NcclResult, ncclGetUniqueId, (NcclUniqueId* id)) \
  X(NcclResult, ncclCommInitRank, (NcclComm* comm, int ranks, NcclUniqueId id, int rank)) \
  X(NcclResult, ncclCommInitAll, (NcclComm* comms, int count, const int* devices)) \
  X(NcclResult, ncclCommDestroy, (NcclComm comm)) \
  X(NcclResult, ncclCommAbort, (NcclComm comm)) \
  X(NcclResult, ncclCommGetAsyncError, (NcclComm comm, NcclResult* error)) \
  X(NcclResult, ncclAllReduce, (const void* send, void* receive, size_t count, int dtype, int op, NcclComm comm, \
                                cudaStream_t stream)) \
  X(NcclResult, ncclBroadcast, (const void* send, void* receive, size_t count, int dtype, int root, NcclComm comm, \
                                cudaStream_t stream))
// clang-format on

// `name` is a declarator here and cannot take parentheses.
#define NIMBUS_NCCL_FIELD(result, name, parameters) \
  result(*name) parameters = nullptr;  // NOLINT(bugprone-macro-parentheses)
struct NcclApi {
  NIMBUS_NCCL_FUNCTIONS(NIMBUS_NCCL_FIELD)
};
#undef NIMBUS_NCCL_FIELD

const NcclApi& nccl();

// Where to look (nimbus/device/nccl.h), as the search takes them: `override_path` is
// $NIMBUS_NCCL_LIBRARY (nullptr: unset). Not cached: the tests try bogus paths.
NcclStatus find_nccl(const char* override_path, NcclApi* api);

// A failed NCCL call throws Unavailable naming the call, NCCL's error and its last message.
[[noreturn]] void throw_nccl_error(NcclResult status, const char* call, NcclComm comm);

}  // namespace nimbus::cuda

#define NIMBUS_NCCL_CHECK(call, comm)                                                                           \
  do {                                                                                                          \
    if (const ::nimbus::cuda::NcclResult nimbus_status = (call); nimbus_status != ::nimbus::cuda::kNcclSuccess) \
      ::nimbus::cuda::throw_nccl_error(nimbus_status, #call, comm);                                             \
  } while (false)
