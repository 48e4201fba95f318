// MultiWorkerMirrored over MPI. Every collective is non-blocking and polled
// against its deadline; beside it each rank sends the others a small "arrived"
// message, so that a timeout can name the ranks that never came.
#include "nimbus/distribute/multi_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "communication_thread.h"
#include "nimbus/base/error.h"
#include "replica_scope.h"

#if NIMBUS_MPI
#include <malloc.h>
#include <mpi.h>

#include <atomic>
#include <mutex>
#include <optional>

#include "collective_timeout.h"
#include "device_collectives.h"
#include "nimbus/device/backend.h"
#include "stream_ordered_buckets.h"
#endif

namespace nimbus::distribute {

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

int local_gpu_index() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

#if NIMBUS_MPI

bool built_with_mpi() { return true; }

namespace {

#define NIMBUS_MPI_CHECK(call)                                                                        \
  do {                                                                                                \
    if (const int mpi_status = (call); mpi_status != MPI_SUCCESS) throw_mpi_error(mpi_status, #call); \
  } while (false)

[[noreturn]] void throw_mpi_error(int status, const char* statement) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Unavailable(fmt::format("MPI: {} failed: {}", statement, std::string(text, static_cast<size_t>(length))));
}

// A failed step leaves collectives in flight: the job must end rather than finalize and wait.
std::atomic<bool> g_failed{false};
// Whether this MPI lets two threads call it at once (else the buckets are all-reduced after backward).
bool g_thread_multiple = false;

void finish_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_failed) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
}

// OpenMPI allocates a scratch buffer the size of the message in each all-reduce and frees it after. glibc
// hands such a block back to the kernel (an munmap, or trimming the heap) and the next collective takes
// fresh pages, a page fault per 4 KiB: on loopback that made collectives of 8-32 MiB 3-15x slower than
// their bandwidth. Fixing the thresholds keeps blocks up to kMessageFloats' size in the heap for reuse.
void keep_collective_scratch() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

void start_mpi() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    // The training thread and the communication thread (gradient buckets, on a communicator of its own)
    // call MPI at the same time.
    NIMBUS_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    keep_collective_scratch();
    g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit(finish_mpi);
  });
}

constexpr int kArrivalTag = 7301;
constexpr size_t kMessageFloats = size_t{2} << 20;  // 8 MiB

class MpiCollectives final : public Collectives {
 public:
  // Over `communicator` (MPI started).
  MpiCollectives(CollectiveOptions options, MPI_Comm communicator) : options_(options), communicator_(communicator) {
    MPI_Comm_rank(communicator_, &rank_);
    MPI_Comm_size(communicator_, &size_);
    arrivals_.resize(static_cast<size_t>(size_));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // In messages of at most kMessageFloats, all in flight at once: OpenMPI's scratch buffer for a larger
  // message is a fresh mmap (past glibc's 32 MiB threshold) whose page faults made a 32 MiB all-reduce
  // on loopback take 140 ms instead of 10.
  void all_reduce(std::span<float> buffer, ReduceOp op) override {
    std::vector<MPI_Request> requests;
    for (size_t start = 0; start < buffer.size(); start += kMessageFloats) {
      const std::span<float> piece = buffer.subspan(start, std::min(kMessageFloats, buffer.size() - start));
      NIMBUS_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, piece.data(), count_of(piece.size()), MPI_FLOAT, MPI_SUM,
                                      communicator_, &requests.emplace_back()));
    }
    wait("all_reduce", std::move(requests));
    if (op == ReduceOp::kMean) {
      for (float& value : buffer) value /= static_cast<float>(size_);
    }
  }
  void broadcast(std::span<std::byte> buffer, int root) override {
    MPI_Request request;
    NIMBUS_MPI_CHECK(MPI_Ibcast(buffer.data(), count_of(buffer.size()), MPI_BYTE, root, communicator_, &request));
    wait("broadcast", {request});
  }
  void all_gather(std::span<const float> send, std::span<float> receive) override {
    if (receive.size() != send.size() * static_cast<size_t>(size_)) {
      throw InvalidArgument(fmt::format("all_gather of {} floats per rank over {} ranks needs {} floats, got {}",
                                        send.size(), size_, send.size() * static_cast<size_t>(size_), receive.size()));
    }
    MPI_Request request;
    NIMBUS_MPI_CHECK(MPI_Iallgather(send.data(), count_of(send.size()), MPI_FLOAT, receive.data(),
                                    count_of(send.size()), MPI_FLOAT, communicator_, &request));
    wait("all_gather", {request});
  }
  void barrier() override {
    MPI_Request request;
    NIMBUS_MPI_CHECK(MPI_Ibarrier(communicator_, &request));
    wait("barrier", {request});
  }

 private:
  static int count_of(size_t count) {
    if (count > static_cast<size_t>(INT_MAX)) {
      throw InvalidArgument(fmt::format("a collective over {} elements: MPI counts stop at {}", count, INT_MAX),
                            "use a smaller runtime.strategy.bucket_size");
    }
    return static_cast<int>(count);
  }

  // Polls the collective's `requests` and the arrival messages until all complete or the deadline passes.
  void wait(const char* collective, std::vector<MPI_Request> requests) {
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    ++sequence_;
    const size_t first_arrival = requests.size();
    std::vector<int> peers;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      peers.push_back(peer);
      requests.emplace_back();
      NIMBUS_MPI_CHECK(MPI_Irecv(&arrivals_[static_cast<size_t>(peer)], 1, MPI_INT64_T, peer, kArrivalTag,
                                 communicator_, &requests.back()));
      requests.emplace_back();
      NIMBUS_MPI_CHECK(MPI_Isend(&sequence_, 1, MPI_INT64_T, peer, kArrivalTag, communicator_, &requests.back()));
    }
    const auto started = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(10);
    bool peers_arrived = false;
    for (;;) {
      int done = 0;
      NIMBUS_MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
      if (done) return;
      if (std::chrono::steady_clock::now() > deadline) break;
      if (!peers_arrived) peers_arrived = all_peers_arrived(std::span(requests).subspan(first_arrival));
      // Each test advances the collective's schedule by a step (OpenMPI has no progress thread): yield
      // between tests while it moves (every peer is here, or the wait is young), and back off to sleeps
      // of up to 1 ms only while a peer is still computing: a large buffer takes many rounds, and a
      // sleep between two of them would hold up every peer.
      if (peers_arrived || std::chrono::steady_clock::now() - started < std::chrono::milliseconds(20)) {
        std::this_thread::yield();
        continue;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(10));
    }
    std::vector<int> missing;
    for (size_t k = 0; k < peers.size(); ++k) {
      int arrived = 0;
      MPI_Test(&requests[first_arrival + 2 * k], &arrived, MPI_STATUS_IGNORE);
      if (!arrived) missing.push_back(peers[k]);
    }
    g_failed = true;
    throw collective_timeout(collective, rank_, size_, missing, options_.timeout, context(),
                             missing.empty() ? peers : std::vector<int>{});
  }

  // Whether every peer's "arrived" message has come (`arrivals`: a receive and a send per peer): a
  // completed receive is freed by MPI_Test, which leaves MPI_REQUEST_NULL behind.
  static bool all_peers_arrived(std::span<MPI_Request> arrivals) {
    bool all = true;
    for (size_t k = 0; k < arrivals.size(); k += 2) {
      int arrived = 0;
      NIMBUS_MPI_CHECK(MPI_Test(&arrivals[k], &arrived, MPI_STATUS_IGNORE));
      all = all && arrived != 0;
    }
    return all;
  }

  CollectiveOptions options_;
  MPI_Comm communicator_;
  int rank_ = 0;
  int size_ = 1;
  int64_t sequence_ = 0;
  // Where the peers' "arrived" messages land; a member, as a timed-out receive may still complete.
  std::vector<int64_t> arrivals_;
};

// MPI_COMM_WORLD once MPI has started.
MPI_Comm world() {
  start_mpi();
  return MPI_COMM_WORLD;
}

// A communicator of its own for the gradient buckets, so that their collectives never interleave with the
// training thread's on MPI_COMM_WORLD. Never freed: MPI_Finalize does.
MPI_Comm gradient_communicator() {
  MPI_Comm communicator;
  NIMBUS_MPI_CHECK(MPI_Comm_dup(world(), &communicator));
  MPI_Comm_set_errhandler(communicator, MPI_ERRORS_RETURN);
  return communicator;
}

// The GPU of this process: the only one it sees (a launcher narrowed CUDA_VISIBLE_DEVICES to it, as
// nimbus k8s's MPIJob does), else the one of its local rank (local_gpu_index).
Device local_gpu() {
  const int count = backend(DeviceType::kCUDA).device_count();
  if (count == 1) return Device::cuda(0);
  const int index = local_gpu_index();
  if (index >= count) {
    throw InvalidArgument(
        fmt::format("multi_worker_mirrored: this process's local rank is {} and it sees {} GPU(s)", index, count),
        "start one process per GPU of a node (mpirun -np <GPUs per node> per node), each seeing "
        "every GPU of its node");
  }
  return Device::cuda(index);
}

class MultiWorkerMirroredStrategy final : public Strategy {
 public:
  MultiWorkerMirroredStrategy(const StrategyOptions& options, DeviceType replicas_on)
      : collectives_(options.collectives, world()),
        device_(replicas_on == DeviceType::kCPU ? Device::cpu() : local_gpu()) {
    if (!device_.is_cpu()) {
      // Gradients through NCCL on the GPU's communication stream; MPI carries the id and the barriers.
      device_collectives_ = nccl_world_member(collectives_, device_, options.collectives);
      stream_buckets_.emplace(*device_collectives_);
    } else if (options.overlap && g_thread_multiple) {
      gradient_collectives_.emplace(options.collectives, gradient_communicator());
      gradient_thread_.emplace(*gradient_collectives_);
    }
    context_ = {.replica_id = collectives_.rank(),
                .num_replicas = collectives_.size(),
                .device = device_,
                .collectives = &collectives_,
                .bucket_bytes = options.bucket_bytes,
                .gradient_thread = gradient_thread_ ? &*gradient_thread_ : nullptr,
                .device_collectives = device_collectives_.get(),
                .stream_buckets = stream_buckets_ ? &*stream_buckets_ : nullptr};
  }
  std::string name() const override { return "multi_worker_mirrored"; }
  std::vector<Device> devices() const override { return {device_}; }
  int worker_rank() const override { return collectives_.rank(); }
  int num_workers() const override { return collectives_.size(); }

  void run(const std::function<void(int)>& fn) override {
    try {
      ReplicaScope scope(&context_);
      fn(0);
    } catch (...) {
      // The other workers may be inside a collective with this one: end the job at exit.
      g_failed = true;
      throw;
    }
  }
  void barrier() override { collectives_.barrier(); }

 private:
  MpiCollectives collectives_;
  Device device_;
  std::unique_ptr<DeviceCollectives> device_collectives_;
  std::optional<StreamOrderedBuckets> stream_buckets_;  // declared after the collectives it uses
  std::optional<MpiCollectives> gradient_collectives_;
  std::optional<CommunicationThread> gradient_thread_;  // declared after what it uses: stops first
  ReplicaContext context_;
};

}  // namespace

std::shared_ptr<Strategy> MultiWorkerMirrored(const StrategyOptions& options, DeviceType replicas_on) {
  return std::make_shared<MultiWorkerMirroredStrategy>(options, replicas_on);
}

#else

bool built_with_mpi() { return false; }

std::shared_ptr<Strategy> MultiWorkerMirrored(const StrategyOptions&, DeviceType) {
  throw Unavailable("multi_worker_mirrored: this build of nimbus has no MPI",
                    "install Debian's OpenMPI (libopenmpi-dev openmpi-bin; scripts/install-deps does) and rebuild");
}

#endif

}  // namespace nimbus::distribute
