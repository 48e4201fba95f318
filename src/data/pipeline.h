// Internals of the input pipeline: dataset nodes (immutable recipes), the
// iterators they make, per-node statistics and the pipeline's thread pool.
// Each node kind lives in its own file under src/data/ and is reached
// through the factory functions at the end of this header.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nimbus/data/dataset.h"

namespace nimbus::data::detail {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Number of cores the pipeline may use (at least 1).
int pipeline_cores();

// What one iterator node measured. Counters are atomics: async nodes update
// them from their own threads while stats() reads them.
struct NodeStats {
  std::string name;
  int depth = 0;  // 0 = the node the consumer calls
  std::atomic<int64_t> produced{0};
  std::atomic<int64_t> busy_ns{0};           // producing elements (sync: own time; async: worker time)
  std::atomic<int64_t> input_wait_ns{0};     // waiting on the input node
  std::atomic<int64_t> consumer_wait_ns{0};  // async nodes: consumer blocked on an empty buffer
  std::atomic<int64_t> buffer_fill{-1};      // -1: no buffer
  std::atomic<int64_t> buffer_capacity{-1};
  std::atomic<int64_t> buffer_bytes{0};
  std::atomic<int64_t> parallelism{-1};  // -1: not parallel
  std::atomic<int64_t> source_reads{0};  // elements read from a file or generator
  std::atomic<int64_t> errors_skipped{0};
  std::atomic<bool> autotuned{false};
  mutable std::mutex note_mutex;
  std::string note;  // what AUTOTUNE chose and why

  void set_note(std::string text) {
    std::lock_guard lock(note_mutex);
    note = std::move(text);
  }
  std::string get_note() const {
    std::lock_guard lock(note_mutex);
    return note;
  }
};

// The stats of every node of one iterator tree (inner iterators of
// flat_map/interleave register once per node kind and depth, and add up).
class StatsRegistry {
 public:
  std::shared_ptr<NodeStats> get(const std::string& name, int depth);
  std::vector<std::shared_ptr<NodeStats>> all() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<NodeStats>> nodes_;
};

// A fixed pool of worker threads for map calls, started at the first
// submit (a pipeline without parallel maps starts none). Tasks never block on
// other tasks (they run user functions only), so a pool of `cores` threads
// cannot deadlock. Destruction drops queued tasks and waits for running ones.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) : threads_(threads) {}
  ~ThreadPool();
  void submit(std::function<void()> task);
  int size() const { return threads_; }
  int started() const;

 private:
  void work();
  const int threads_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

class DatasetNode;

// A batch's rows are allocated at once up to this many bytes (a huge batch_size on a short data set
// must not reserve it all); past that they double as elements arrive.
inline constexpr int64_t kBatchUpfrontBytes = int64_t{64} << 20;

// Where a parallel, deterministic map right before a batch puts its results (TensorFlow's
// map_and_batch fusion): element i of the map's output is row i % batch_size of batch i / batch_size,
// so the map's worker copies each result into that batch's buffer while the result is still in its
// core's cache, and the batch finds its rows in place instead of copying them on its own thread. A
// result unlike its batch's first placed one stays where it is, and so do rows that an error shifted:
// the batch copies those as before (transform_batch.cc).
class BatchSlots {
 public:
  explicit BatchSlots(int64_t batch_size) : batch_size_(batch_size) {}
  int64_t batch_size() const { return batch_size_; }
  // On a map worker: `element` (the map's output number `index`) copied into its row, returned as
  // views of that row; `element` itself when it does not fit the row.
  Element place(int64_t index, Element element);
  // The buffers of the batch whose row 0 `element`'s tensors are; empty when they are not.
  std::vector<Tensor> buffers_starting_with(const Element& element) const;
  // The consumer took the map's output `index`: no later result goes into a batch before it.
  void taken(int64_t index);
  // The first component's row of output `index` when its batch's buffers exist and its rows have
  // this shape and dtype (element_output_tensor hands it out).
  std::optional<Tensor> first_component_row(int64_t index, const Shape& shape, DType dtype) const;

 private:
  const int64_t batch_size_;
  mutable std::mutex mutex_;
  std::map<int64_t, std::vector<Tensor>> buffers_;  // batch -> one buffer per component (empty: too large)
};

// While one is alive, this thread runs the map call for output `index` of a map whose results go into
// batch rows: the first element_output_tensor of the row's shape and dtype is that row itself. With
// null slots (a pipeline iterated inside such a call), none is.
class BatchRowScope {
 public:
  BatchRowScope(const BatchSlots* slots, int64_t index);
  ~BatchRowScope();
  BatchRowScope(const BatchRowScope&) = delete;
  BatchRowScope& operator=(const BatchRowScope&) = delete;

 private:
  const BatchSlots* previous_slots_;
  int64_t previous_index_;
  bool previous_claimed_;
};

// A new host tensor for an image op's result: inside a BatchRowScope, the first one shaped like the
// batch's row is that row, so the op that makes an element's last value (normalize, a traced map's
// scale_shift_to_f32) writes it straight into the batch and BatchSlots::place finds it in place.
struct ElementOutput {
  Tensor tensor;
  // A batch row: the op may write it with streaming stores, as this thread does not read it again.
  bool batch_row = false;
};
ElementOutput element_output_tensor(const Shape& shape, DType dtype);

// Shared by every iterator of one iteration (one Iterator object).
struct IteratorContext {
  std::shared_ptr<ThreadPool> pool;
  std::shared_ptr<StatsRegistry> stats;
  uint64_t seed = 0;       // base seed for random nodes without their own
  uint64_t iteration = 0;  // which iteration of the dataset this is (reshuffling)
  int cores = 1;
  int depth = 0;  // depth of the node being built
  // How many iterators each node has made in this iteration (repeat's epochs).
  struct EpochCounters {
    std::mutex mutex;
    std::map<const void*, uint64_t> counts;
  };
  std::shared_ptr<EpochCounters> epochs;
  // Set when the Iterator is destroyed: blocked pipeline threads give up.
  std::shared_ptr<std::atomic<bool>> cancelled;
  // Set by batch while it builds its input's iterator: when that input is a parallel, deterministic
  // map, the map takes `batch_slots` (leaving it null) and places its results into the batch's rows.
  const DatasetNode* batch_input = nullptr;
  std::shared_ptr<BatchSlots> batch_slots;
  uint64_t next_epoch(const void* node) {
    std::lock_guard lock(epochs->mutex);
    return epochs->counts[node]++;
  }
};

class IteratorImpl {
 public:
  explicit IteratorImpl(std::shared_ptr<NodeStats> stats, bool asynchronous = false)
      : stats_(std::move(stats)), asynchronous_(asynchronous) {}
  virtual ~IteratorImpl() = default;
  IteratorImpl(const IteratorImpl&) = delete;
  IteratorImpl& operator=(const IteratorImpl&) = delete;

  // The next element or nullopt at the end; times the call into the stats.
  std::optional<Element> next();
  NodeStats& stats() { return *stats_; }
  const std::shared_ptr<NodeStats>& stats_shared() const { return stats_; }

 protected:
  virtual std::optional<Element> get_next() = 0;
  // Pulls from an input on the consumer's thread, timing the wait.
  std::optional<Element> pull(IteratorImpl& input);

 private:
  std::shared_ptr<NodeStats> stats_;
  bool asynchronous_;
  int64_t wait_in_call_ns_ = 0;
};

class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const = 0;
  virtual int64_t cardinality() const { return kUnknownCardinality; }
  // One line: kind and arguments (no functions).
  virtual std::string describe() const = 0;
  virtual std::vector<std::shared_ptr<const DatasetNode>> inputs() const { return {}; }
  // False when element order depends on thread timing.
  virtual bool deterministic() const { return true; }

  // Iterations started from this node as the root (reshuffle_each_iteration).
  mutable std::atomic<uint64_t> iterations{0};
};

// Thrown inside pipeline threads when their Iterator is being destroyed; not
// a nimbus::Error, so ignore_errors() does not swallow it.
struct IterationCancelled : std::exception {
  const char* what() const noexcept override { return "input pipeline iteration cancelled"; }
};

// Waits on `cv` until `ready()`, checking every few milliseconds whether the
// iteration was cancelled (then throws IterationCancelled).
template <typename Ready>
void wait_unless_cancelled(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                           const std::atomic<bool>& cancelled, Ready ready) {
  while (!ready()) {
    if (cancelled.load(std::memory_order_relaxed)) throw IterationCancelled();
    cv.wait_for(lock, std::chrono::milliseconds(5));
  }
}

// A node with one input.
class UnaryNode : public DatasetNode {
 public:
  explicit UnaryNode(std::shared_ptr<const DatasetNode> input) : input_(std::move(input)) {}
  std::vector<std::shared_ptr<const DatasetNode>> inputs() const override { return {input_}; }

 protected:
  // For nodes that drop or split elements: unknown, unless the input is infinite.
  int64_t unknown_unless_infinite() const {
    return input_->cardinality() == kInfiniteCardinality ? kInfiniteCardinality : kUnknownCardinality;
  }
  std::shared_ptr<const DatasetNode> input_;
};

// Builds the iterator of `node` one level deeper than the caller's.
std::unique_ptr<IteratorImpl> make_input_iterator(const DatasetNode& node, IteratorContext& ctx);
std::shared_ptr<NodeStats> node_stats(IteratorContext& ctx, const std::string& name);

// State behind a public Iterator.
class IteratorState {
 public:
  IteratorState(std::shared_ptr<const DatasetNode> root, uint64_t seed, uint64_t iteration);
  ~IteratorState();
  std::optional<Element> next();
  std::string stats_text() const;
  std::string stats_json() const;
  std::string save() const;
  uint64_t produced() const { return produced_; }
  int64_t wait_ns() const { return wait_ns_; }

 private:
  std::shared_ptr<const DatasetNode> root_;
  IteratorContext ctx_;
  std::unique_ptr<IteratorImpl> impl_;
  uint64_t produced_ = 0;
  bool ended_ = false;
  int64_t started_ns_ = 0;
  int64_t wait_ns_ = 0;
};

// ---- small helpers ----

// 64-bit mixing (SplitMix64's finalizer): seeds for nodes and epochs.
uint64_t mix_seed(uint64_t a, uint64_t b);
// A small, fully specified PRNG (xoshiro256**) so orders are the same on
// every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  // Uniform in [0, bound), bound > 0 (Lemire's method, unbiased).
  uint64_t below(uint64_t bound);

 private:
  uint64_t s_[4];
};

// Element i of `tensor` along axis 0, as a view (no copy).
Tensor slice0(const Tensor& tensor, int64_t i);
// Sum of the components' bytes.
int64_t element_bytes(const Element& element);
// "(f32[2, 3], u8[17])"
std::string element_signature(const Element& element);

// ---- node factories (one file each) ----
using NodePtr = std::shared_ptr<const DatasetNode>;

NodePtr make_tensors_node(Element components, bool slices);
NodePtr make_generator_node(GeneratorFactory factory, std::string name);
NodePtr make_range_node(int64_t start, int64_t stop, int64_t step);
NodePtr make_text_line_node(std::vector<std::string> paths);
NodePtr make_list_files_node(std::vector<std::string> patterns, bool shuffle, std::optional<uint64_t> seed);
NodePtr make_tfrecord_node(std::vector<std::string> paths, Compression compression, bool with_origin);
NodePtr make_csv_node(std::vector<std::string> paths, CsvOptions options);

NodePtr make_map_node(NodePtr input, MapFn fn, int parallelism, bool deterministic, std::string name);
NodePtr make_filter_node(NodePtr input, FilterFn predicate);
NodePtr make_interleave_node(NodePtr input, FlatMapFn fn, int cycle_length, int block_length, int parallelism);
NodePtr make_shuffle_node(NodePtr input, int64_t buffer_size, std::optional<uint64_t> seed, bool reshuffle);
NodePtr make_batch_node(NodePtr input, int64_t batch_size, bool drop_remainder, bool padded,
                        std::vector<Shape> padded_shapes, std::vector<double> padding_values);
NodePtr make_unbatch_node(NodePtr input);
NodePtr make_cache_node(NodePtr input, std::string filename);
NodePtr make_prefetch_node(NodePtr input, int64_t buffer_size);
NodePtr make_repeat_node(NodePtr input, int64_t count);
NodePtr make_take_skip_node(NodePtr input, int64_t count, bool take);
NodePtr make_shard_node(NodePtr input, int64_t num_shards, int64_t index);
NodePtr make_zip_node(std::vector<NodePtr> inputs);
NodePtr make_enumerate_node(NodePtr input, int64_t start);
NodePtr make_ignore_errors_node(NodePtr input, ErrorHandler on_error);

// The prefetching iterator, also used by parallel interleave to read each
// inner dataset ahead.
std::unique_ptr<IteratorImpl> make_prefetch_iterator(std::unique_ptr<IteratorImpl> input,
                                                     std::shared_ptr<NodeStats> stats, int64_t buffer_size,
                                                     std::shared_ptr<std::atomic<bool>> cancelled);

}  // namespace nimbus::data::detail
