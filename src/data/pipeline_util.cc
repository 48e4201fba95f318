// Shared pieces of the pipeline: the thread pool, iterator timing, stats
// registry, seeds and tensor slicing/stacking.
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/device/host_memory.h"
#include "src/data/pipeline.h"

namespace nimbus::data {

Tensor host_tensor(const Shape& shape, DType dtype) {
  const HostMemoryScope host;
  return Tensor::empty(shape, dtype, Device::cpu());
}

Tensor string_tensor(std::string_view text) {
  Tensor t = host_tensor(Shape{static_cast<int64_t>(text.size())}, DType::kU8);
  if (!text.empty()) std::memcpy(t.raw_data(), text.data(), text.size());
  return t;
}

std::string tensor_string(const Tensor& tensor) {
  if (tensor.dtype() != DType::kU8) {
    throw InvalidArgument(fmt::format("expected a string (u8 tensor), got a {} tensor of shape {}",
                                      dtype_name(tensor.dtype()), tensor.shape().to_string()));
  }
  return std::string(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
}

namespace detail {

int pipeline_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// ---- thread pool ----

void ThreadPool::work() {
  // Named so that the monitor's per-thread CPU figures show the pipeline's workers apart.
  pthread_setname_np(pthread_self(), "nimbus-data");
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

int ThreadPool::started() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(workers_.size());
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    tasks_.clear();
  }
  cv_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (workers_.empty()) {
      for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { work(); });
    }
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

// ---- iterators and stats ----

std::optional<Element> IteratorImpl::next() {
  const int64_t start = now_ns();
  wait_in_call_ns_ = 0;
  std::optional<Element> result = get_next();
  const int64_t elapsed = now_ns() - start;
  if (asynchronous_) {
    stats_->consumer_wait_ns += elapsed;
  } else {
    stats_->busy_ns += std::max<int64_t>(0, elapsed - wait_in_call_ns_);
  }
  if (result) stats_->produced++;
  return result;
}

std::optional<Element> IteratorImpl::pull(IteratorImpl& input) {
  const int64_t start = now_ns();
  std::optional<Element> result;
  try {
    result = input.next();
  } catch (...) {
    const int64_t waited = now_ns() - start;
    wait_in_call_ns_ += waited;
    stats_->input_wait_ns += waited;
    throw;
  }
  const int64_t waited = now_ns() - start;
  wait_in_call_ns_ += waited;
  stats_->input_wait_ns += waited;
  return result;
}

std::shared_ptr<NodeStats> StatsRegistry::get(const std::string& name, int depth) {
  std::lock_guard lock(mutex_);
  for (auto& node : nodes_) {
    if (node->name == name && node->depth == depth) return node;
  }
  auto node = std::make_shared<NodeStats>();
  node->name = name;
  node->depth = depth;
  nodes_.push_back(node);
  return node;
}

std::vector<std::shared_ptr<NodeStats>> StatsRegistry::all() const {
  std::lock_guard lock(mutex_);
  return nodes_;
}

std::shared_ptr<NodeStats> node_stats(IteratorContext& ctx, const std::string& name) {
  return ctx.stats->get(name, ctx.depth);
}

std::unique_ptr<IteratorImpl> make_input_iterator(const DatasetNode& node, IteratorContext& ctx) {
  ctx.depth++;
  struct Restore {
    IteratorContext& ctx;
    ~Restore() { ctx.depth--; }
  } restore{ctx};
  return node.make_iterator(ctx);
}

// ---- seeds ----

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Rng::Rng(uint64_t seed) {
  for (int i = 0; i < 4; ++i) s_[i] = mix_seed(seed, static_cast<uint64_t>(i));
}

uint64_t Rng::next() {
  auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

// ---- tensors ----

Tensor slice0(const Tensor& tensor, int64_t i) {
  if (tensor.rank() == 0) throw InvalidArgument("cannot slice a scalar (rank-0) tensor along its first axis");
  Shape inner;
  for (int d = 1; d < tensor.rank(); ++d) inner.push_back(tensor.dim(d));
  const size_t row_bytes = static_cast<size_t>(inner.numel()) * dtype_size(tensor.dtype());
  const auto& impl = *tensor.impl_ptr();
  return Tensor::view(impl.storage, impl.offset + static_cast<size_t>(i) * row_bytes, inner, tensor.dtype());
}

int64_t element_bytes(const Element& element) {
  int64_t total = 0;
  for (const Tensor& t : element) total += static_cast<int64_t>(t.nbytes());
  return total;
}

std::string element_signature(const Element& element) {
  std::string out = "(";
  for (size_t i = 0; i < element.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}{}", dtype_name(element[i].dtype()), element[i].shape().to_string());
  }
  return out + ")";
}

}  // namespace detail
}  // namespace nimbus::data
