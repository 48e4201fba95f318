#include "nimbus/distribute/strategy.h"

#include <fmt/format.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "communication_thread.h"
#include "device_collectives.h"
#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/logical_devices.h"
#include "replica_scope.h"
#include "stream_ordered_buckets.h"

namespace nimbus::distribute {
namespace {

thread_local const ReplicaContext* t_current_replica = nullptr;

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

class OneDeviceStrategy final : public Strategy {
 public:
  explicit OneDeviceStrategy(Device device) : device_(device) {
    (void)backend(device.type);  // Unavailable now, not at the first step, when there is no such backend
  }
  std::string name() const override { return "one_device"; }
  std::vector<Device> devices() const override { return {device_}; }
  // One replica has nobody to wait for: the step runs as it would without a strategy.
  void run(const std::function<void(int)>& fn) override { fn(0); }

 private:
  Device device_;
};

void check_devices(const std::vector<Device>& devices) {
  if (devices.empty()) throw InvalidArgument("mirrored: no devices", "list the replicas' devices, e.g. [cpu:0, cpu:1]");
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device device = devices[i];
    if (device.type != devices[0].type) {
      throw InvalidArgument(fmt::format("mirrored: replicas on {} and {}: every replica must be on the same kind of "
                                        "device",
                                        devices[0].to_string(), device.to_string()),
                            "list CPU devices only or GPUs only");
    }
    if (device.index >= backend(device.type).device_count()) {
      throw InvalidArgument(
          device.is_cpu() ? fmt::format("mirrored: device {} does not exist: the CPU has {} logical device(s)",
                                        device.to_string(), backend(device.type).device_count())
                          : fmt::format("mirrored: device {} does not exist: this machine has {} GPU(s)",
                                        device.to_string(), backend(device.type).device_count()),
          device.is_cpu() ? "split the CPU first with set_logical_cpu_devices (a config's runtime.strategy does so)"
                          : "list the GPUs there are (CUDA_VISIBLE_DEVICES applied)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == device) {
        throw InvalidArgument(fmt::format("mirrored: device {} is listed twice", device.to_string()),
                              "give each replica its own device");
      }
    }
  }
}

// Logical CPU devices have thread budgets; a GPU replica's thread only launches work.
std::optional<LogicalDeviceScope> device_scope(Device device) {
  if (!device.is_cpu()) return std::nullopt;
  return std::optional<LogicalDeviceScope>(std::in_place, device);
}

// One thread per replica, kept for the strategy's life so that each keeps its
// OpenMP pool (a new host thread would build a new one every step).
class MirroredStrategy final : public Strategy {
 public:
  MirroredStrategy(const std::vector<Device>& devices, const StrategyOptions& options)
      : devices_(devices), options_(options) {
    check_devices(devices_);
    make_group();
    for (size_t i = 0; i < devices_.size(); ++i) threads_.emplace_back([this, i] { serve(static_cast<int>(i)); });
  }

  ~MirroredStrategy() override {
    gradient_threads_.clear();
    stream_buckets_.clear();
    device_collectives_.clear();
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

  std::string name() const override { return "mirrored"; }
  std::vector<Device> devices() const override { return devices_; }

  void run(const std::function<void(int)>& fn) override {
    std::unique_lock lock(mutex_);
    // A failed run left its group aborted: the next run starts with a fresh one.
    if (group_->aborted() || gradient_group_->aborted() || device_aborted_) make_group();
    job_ = &fn;
    first_error_ = nullptr;
    pending_ = static_cast<int>(devices_.size());
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (first_error_) std::rethrow_exception(first_error_);
  }

 private:
  void make_group() {
    gradient_threads_.clear();  // before the groups they use
    stream_buckets_.clear();
    device_collectives_.clear();
    device_aborted_ = false;
    const int size = static_cast<int>(devices_.size());
    group_ = std::make_unique<InProcessGroup>(size, options_.collectives);
    // The gradient buckets' all-reduces run on communication threads (or streams), in a group of their own.
    gradient_group_ = std::make_unique<InProcessGroup>(size, options_.collectives);
    if (!devices_[0].is_cpu()) {
      device_collectives_ = nccl_local_group(devices_, options_.collectives);
    } else if (options_.device_streams) {
      for (int i = 0; i < size; ++i) {
        device_collectives_.push_back(
            host_device_collectives(gradient_group_->member(i), devices_[static_cast<size_t>(i)]));
      }
    }
    for (auto& collectives : device_collectives_) {
      stream_buckets_.push_back(std::make_unique<StreamOrderedBuckets>(*collectives));
    }
    const bool threads = options_.overlap && device_collectives_.empty();
    contexts_.clear();
    for (int i = 0; i < size; ++i) {
      if (threads) gradient_threads_.push_back(std::make_unique<CommunicationThread>(gradient_group_->member(i)));
      const auto r = static_cast<size_t>(i);
      contexts_.push_back({.replica_id = i,
                           .num_replicas = size,
                           .device = devices_[r],
                           .collectives = &group_->member(i),
                           .bucket_bytes = options_.bucket_bytes,
                           .gradient_thread = threads ? gradient_threads_.back().get() : nullptr,
                           .device_collectives = device_collectives_.empty() ? nullptr : device_collectives_[r].get(),
                           .stream_buckets = stream_buckets_.empty() ? nullptr : stream_buckets_[r].get()});
    }
  }

  void serve(int index) {
    const std::optional<LogicalDeviceScope> scope_of_device = device_scope(devices_[static_cast<size_t>(index)]);
    uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      const std::function<void(int)>* job = job_;
      const ReplicaContext* context = &contexts_[static_cast<size_t>(index)];
      InProcessGroup* group = group_.get();
      InProcessGroup* gradient_group = gradient_group_.get();
      lock.unlock();
      try {
        ReplicaScope scope(context);
        (*job)(index);
      } catch (...) {
        // Kept and rethrown by run(); the others are released from their collectives first.
        const std::exception_ptr error = std::current_exception();
        lock.lock();
        if (!first_error_) first_error_ = error;
        lock.unlock();
        const std::string reason = fmt::format("replica {} failed: {}", index, describe(error));
        group->abort(reason);
        gradient_group->abort(reason);
        lock.lock();
        for (auto& collectives : device_collectives_) collectives->abort(reason);
        device_aborted_ = true;
        lock.unlock();
      }
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::vector<Device> devices_;
  StrategyOptions options_;
  std::unique_ptr<InProcessGroup> group_, gradient_group_;
  std::vector<std::unique_ptr<CommunicationThread>> gradient_threads_;
  // The GPU path (device_collectives.h): per replica, empty on CPU devices unless device_streams.
  std::vector<std::unique_ptr<DeviceCollectives>> device_collectives_;
  std::vector<std::unique_ptr<StreamOrderedBuckets>> stream_buckets_;
  bool device_aborted_ = false;
  std::vector<ReplicaContext> contexts_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr first_error_;
};

}  // namespace

const ReplicaContext* current_replica() { return t_current_replica; }

ReplicaScope::ReplicaScope(const ReplicaContext* context) : previous_(t_current_replica) {
  t_current_replica = context;
}
ReplicaScope::~ReplicaScope() { t_current_replica = previous_; }

std::shared_ptr<Strategy> OneDevice(Device device) { return std::make_shared<OneDeviceStrategy>(device); }

std::shared_ptr<Strategy> Mirrored(const std::vector<Device>& devices, const StrategyOptions& options) {
  return std::make_shared<MirroredStrategy>(devices, options);
}

}  // namespace nimbus::distribute
