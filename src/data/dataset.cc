// Dataset's builder methods, Iterator, stats summaries and iterator state.
#include "nimbus/data/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "nimbus/base/error.h"
#include "nimbus/data/idx.h"
#include "src/data/pipeline.h"

namespace nimbus::data {

using detail::NodePtr;

Dataset::Dataset(std::shared_ptr<const detail::DatasetNode> node) : node_(std::move(node)) {
  NIMBUS_ASSERT(node_ != nullptr) << "Dataset without a node";
}

Dataset Dataset::from_tensors(Element components) {
  return Dataset(detail::make_tensors_node(std::move(components), false));
}
Dataset Dataset::from_tensor_slices(Element components) {
  return Dataset(detail::make_tensors_node(std::move(components), true));
}
Dataset Dataset::from_generator(GeneratorFactory make_generator, std::string name) {
  return Dataset(detail::make_generator_node(std::move(make_generator), std::move(name)));
}
Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  return Dataset(detail::make_range_node(start, stop, step));
}
Dataset Dataset::idx(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InvalidArgument("Dataset::idx: no files given");
  Element tensors;
  for (const auto& path : paths) tensors.push_back(read_idx(path));
  return from_tensor_slices(std::move(tensors));
}
Dataset Dataset::text_line(std::vector<std::string> paths) {
  return Dataset(detail::make_text_line_node(std::move(paths)));
}
Dataset Dataset::list_files(std::vector<std::string> patterns, bool shuffle, std::optional<uint64_t> seed) {
  return Dataset(detail::make_list_files_node(std::move(patterns), shuffle, seed));
}
Dataset Dataset::tfrecord(std::vector<std::string> paths, Compression compression, bool with_origin) {
  return Dataset(detail::make_tfrecord_node(std::move(paths), compression, with_origin));
}
Dataset Dataset::csv(std::vector<std::string> paths, CsvOptions options) {
  return Dataset(detail::make_csv_node(std::move(paths), std::move(options)));
}

Dataset Dataset::map(MapFn fn, int num_parallel_calls, bool deterministic, std::string name) const {
  if (num_parallel_calls == 0 || num_parallel_calls < kAutotune) {
    throw InvalidArgument(fmt::format("map: num_parallel_calls must be >= 1 or kAutotune, got {}", num_parallel_calls));
  }
  return Dataset(detail::make_map_node(node_, std::move(fn), num_parallel_calls, deterministic, std::move(name)));
}
Dataset Dataset::filter(FilterFn predicate) const {
  return Dataset(detail::make_filter_node(node_, std::move(predicate)));
}
Dataset Dataset::flat_map(FlatMapFn fn) const { return interleave(std::move(fn), 1, 1, 1); }
Dataset Dataset::interleave(FlatMapFn fn, int cycle_length, int block_length, int num_parallel_calls) const {
  if (cycle_length < 1 || block_length < 1) {
    throw InvalidArgument(
        fmt::format("interleave: cycle_length ({}) and block_length ({}) must be >= 1", cycle_length, block_length));
  }
  if (num_parallel_calls == 0 || num_parallel_calls < kAutotune) {
    throw InvalidArgument(
        fmt::format("interleave: num_parallel_calls must be >= 1 or kAutotune, got {}", num_parallel_calls));
  }
  return Dataset(detail::make_interleave_node(node_, std::move(fn), cycle_length, block_length, num_parallel_calls));
}
Dataset Dataset::shuffle(int64_t buffer_size, std::optional<uint64_t> seed, bool reshuffle_each_iteration) const {
  if (buffer_size < 1) throw InvalidArgument(fmt::format("shuffle: buffer_size must be >= 1, got {}", buffer_size));
  return Dataset(detail::make_shuffle_node(node_, buffer_size, seed, reshuffle_each_iteration));
}
Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  if (batch_size < 1) throw InvalidArgument(fmt::format("batch: batch_size must be >= 1, got {}", batch_size));
  return Dataset(detail::make_batch_node(node_, batch_size, drop_remainder, false, {}, {}));
}
Dataset Dataset::padded_batch(int64_t batch_size, std::vector<Shape> padded_shapes, std::vector<double> padding_values,
                              bool drop_remainder) const {
  if (batch_size < 1) {
    throw InvalidArgument(fmt::format("padded_batch: batch_size must be >= 1, got {}", batch_size));
  }
  return Dataset(detail::make_batch_node(node_, batch_size, drop_remainder, true, std::move(padded_shapes),
                                         std::move(padding_values)));
}
Dataset Dataset::unbatch() const { return Dataset(detail::make_unbatch_node(node_)); }
Dataset Dataset::cache(std::string filename) const {
  return Dataset(detail::make_cache_node(node_, std::move(filename)));
}
Dataset Dataset::prefetch(int64_t buffer_size) const {
  if (buffer_size == 0 || buffer_size < kAutotune) {
    throw InvalidArgument(fmt::format("prefetch: buffer_size must be >= 1 or kAutotune, got {}", buffer_size));
  }
  return Dataset(detail::make_prefetch_node(node_, buffer_size));
}
Dataset Dataset::repeat(int64_t count) const { return Dataset(detail::make_repeat_node(node_, count)); }
Dataset Dataset::take(int64_t count) const { return Dataset(detail::make_take_skip_node(node_, count, true)); }
Dataset Dataset::skip(int64_t count) const { return Dataset(detail::make_take_skip_node(node_, count, false)); }
Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    throw InvalidArgument(fmt::format(
        "shard: need num_shards >= 1 and 0 <= index < num_shards, got num_shards={} index={}", num_shards, index));
  }
  return Dataset(detail::make_shard_node(node_, num_shards, index));
}
Dataset Dataset::zip(const std::vector<Dataset>& datasets) {
  if (datasets.empty()) throw InvalidArgument("zip: no datasets given");
  std::vector<NodePtr> nodes;
  nodes.reserve(datasets.size());
  for (const auto& d : datasets) nodes.push_back(d.node());
  return Dataset(detail::make_zip_node(std::move(nodes)));
}
Dataset Dataset::enumerate(int64_t start) const { return Dataset(detail::make_enumerate_node(node_, start)); }
Dataset Dataset::ignore_errors(ErrorHandler on_error) const {
  return Dataset(detail::make_ignore_errors_node(node_, std::move(on_error)));
}

int64_t Dataset::cardinality() const { return node_->cardinality(); }

namespace {
void describe_into(const detail::DatasetNode& node, std::string& out) {
  for (const auto& input : node.inputs()) describe_into(*input, out);
  out += node.describe();
  out += '\n';
}

bool all_deterministic(const detail::DatasetNode& node) {
  if (!node.deterministic()) return false;
  for (const auto& input : node.inputs()) {
    if (!all_deterministic(*input)) return false;
  }
  return true;
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}
}  // namespace

std::string Dataset::describe() const {
  std::string out;
  describe_into(*node_, out);
  return out;
}

Iterator Dataset::iterator() const {
  return Iterator(std::make_unique<detail::IteratorState>(node_, random_seed(), node_->iterations++));
}

Iterator Dataset::iterator(uint64_t seed, uint64_t iteration) const {
  // Unseeded random nodes draw from the base seed alone: mixing in the iteration gives each one
  // another order.
  return Iterator(std::make_unique<detail::IteratorState>(node_, detail::mix_seed(seed, iteration), iteration));
}

std::vector<Element> Dataset::collect() const {
  if (cardinality() == kInfiniteCardinality) throw InvalidArgument("collect: the dataset is infinite");
  std::vector<Element> out;
  Iterator it = iterator();
  while (auto element = it.next()) out.push_back(std::move(*element));
  return out;
}

// ---- Iterator ----

Iterator::Iterator(std::unique_ptr<detail::IteratorState> state) : state_(std::move(state)) {}
Iterator::Iterator(Iterator&&) noexcept = default;
Iterator& Iterator::operator=(Iterator&&) noexcept = default;
Iterator::~Iterator() = default;

std::optional<Element> Iterator::next() {
  if (!state_) throw InvalidArgument("next() on a moved-from Iterator");
  return state_->next();
}
std::string Iterator::stats() const { return state_ ? state_->stats_text() : std::string(); }
std::string Iterator::stats_json() const { return state_ ? state_->stats_json() : std::string("{}"); }
double Iterator::wait_seconds() const { return state_ ? static_cast<double>(state_->wait_ns()) / 1e9 : 0.0; }
std::string Iterator::save() const {
  if (!state_) throw InvalidArgument("save() on a moved-from Iterator");
  return state_->save();
}

namespace detail {

IteratorState::IteratorState(std::shared_ptr<const DatasetNode> root, uint64_t seed, uint64_t iteration)
    : root_(std::move(root)) {
  ctx_.cores = pipeline_cores();
  ctx_.pool = std::make_shared<ThreadPool>(ctx_.cores);
  ctx_.stats = std::make_shared<StatsRegistry>();
  ctx_.seed = seed;
  ctx_.iteration = iteration;
  ctx_.depth = 0;
  ctx_.epochs = std::make_shared<IteratorContext::EpochCounters>();
  ctx_.cancelled = std::make_shared<std::atomic<bool>>(false);
  started_ns_ = now_ns();
  impl_ = root_->make_iterator(ctx_);
}

// The iterator tree goes first (its threads stop and drop their tasks), then
// the pool.
IteratorState::~IteratorState() {
  ctx_.cancelled->store(true);
  impl_.reset();
}

std::optional<Element> IteratorState::next() {
  ++produced_;  // counts calls, failed ones included: restore replays them all
  if (ended_) return std::nullopt;
  const int64_t start = now_ns();
  struct AddWait {
    int64_t& total;
    int64_t start;
    ~AddWait() { total += now_ns() - start; }
  } add_wait{wait_ns_, start};
  // A pipeline iterated inside a map call that writes into a batch row makes tensors of its own.
  const BatchRowScope no_batch_row(nullptr, 0);
  std::optional<Element> element = impl_->next();
  if (!element) ended_ = true;
  return element;
}

std::string IteratorState::stats_text() const {
  auto nodes = ctx_.stats->all();
  std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a->depth > b->depth; });
  const double wall_ms = static_cast<double>(now_ns() - started_ns_) / 1e6;
  std::string out = fmt::format(
      "input pipeline: {} next() calls in {:.1f} ms, the caller waited {:.1f} ms in next(); {} of {} pool "
      "threads started ({} cores)\n",
      produced_, wall_ms, static_cast<double>(wait_ns_) / 1e6, ctx_.pool->started(), ctx_.pool->size(), ctx_.cores);
  out += fmt::format("{:<26} {:>10} {:>10} {:>12} {:>13} {:>11} {:>11} {:>8}  {}\n", "node (input first)", "produced",
                     "busy ms", "in-wait ms", "out-wait ms", "buffer", "buffer MiB", "parallel", "notes");
  for (const auto& n : nodes) {
    std::string buffer = n->buffer_capacity >= 0
                             ? fmt::format("{}/{}", n->buffer_fill.load(), n->buffer_capacity.load())
                             : std::string("-");
    std::string parallel =
        n->parallelism >= 0 ? fmt::format("{}{}", n->parallelism.load(), n->autotuned ? "*" : "") : std::string("-");
    std::string notes = n->get_note();
    if (n->source_reads > 0) {
      notes += fmt::format("{}read {} from source", notes.empty() ? "" : "; ", n->source_reads.load());
    }
    if (n->errors_skipped > 0) {
      notes += fmt::format("{}skipped {} bad elements", notes.empty() ? "" : "; ", n->errors_skipped.load());
    }
    out += fmt::format("{:<26} {:>10} {:>10.1f} {:>12.1f} {:>13.1f} {:>11} {:>11.2f} {:>8}  {}\n",
                       std::string(static_cast<size_t>(std::min(n->depth, 8)), ' ') + n->name, n->produced.load(),
                       static_cast<double>(n->busy_ns) / 1e6, static_cast<double>(n->input_wait_ns) / 1e6,
                       static_cast<double>(n->consumer_wait_ns) / 1e6, buffer,
                       static_cast<double>(n->buffer_bytes) / (1024.0 * 1024.0), parallel, notes);
  }
  // Host memory held by the pipeline's buffers, and who holds the most.
  int64_t total_bytes = 0;
  std::shared_ptr<NodeStats> largest;
  for (const auto& n : nodes) {
    total_bytes += n->buffer_bytes;
    if (n->buffer_bytes > 0 && (!largest || n->buffer_bytes > largest->buffer_bytes)) largest = n;
  }
  if (largest) {
    out += fmt::format("host memory in buffers: {:.2f} MiB; the largest consumer is {} ({:.2f} MiB){}\n",
                       static_cast<double>(total_bytes) / 1048576.0, largest->name,
                       static_cast<double>(largest->buffer_bytes) / 1048576.0,
                       largest->name == "shuffle" ? ": a smaller shuffle buffer trades randomness for memory" : "");
  }
  out +=
      "(* = chosen by AUTOTUNE; in-wait = time waiting on the node's input; out-wait = time its consumer waited on "
      "its buffer)\n";
  return out;
}

std::string IteratorState::stats_json() const {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : ctx_.stats->all()) {
    nodes.push_back({{"name", n->name},
                     {"depth", n->depth},
                     {"produced", n->produced.load()},
                     {"busy_ns", n->busy_ns.load()},
                     {"input_wait_ns", n->input_wait_ns.load()},
                     {"consumer_wait_ns", n->consumer_wait_ns.load()},
                     {"buffer_fill", n->buffer_fill.load()},
                     {"buffer_capacity", n->buffer_capacity.load()},
                     {"buffer_bytes", n->buffer_bytes.load()},
                     {"parallelism", n->parallelism.load()},
                     {"autotuned", n->autotuned.load()},
                     {"source_reads", n->source_reads.load()},
                     {"errors_skipped", n->errors_skipped.load()},
                     {"note", n->get_note()}});
  }
  return nlohmann::json{{"calls", produced_}, {"wait_ns", wait_ns_}, {"cores", ctx_.cores}, {"nodes", nodes}}.dump();
}

std::string IteratorState::save() const {
  if (!all_deterministic(*root_)) {
    throw InvalidArgument(
        "Iterator::save: the pipeline's order depends on thread timing, so its position cannot be "
        "restored",
        "use map(..., deterministic=true) (the default) in pipelines whose iterators you save");
  }
  std::string description;
  describe_into(*root_, description);
  nlohmann::json state = {{"format", "nimbus.data.iterator/1"},
                          {"pipeline", fmt::format("{:016x}", fnv1a(description))},
                          {"seed", ctx_.seed},
                          {"iteration", ctx_.iteration},
                          {"calls", produced_}};
  return state.dump();
}

}  // namespace detail

Iterator Iterator::restore(const Dataset& dataset, const std::string& state_text) {
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(state_text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("Iterator::restore: the saved state is not valid JSON: {}", e.what()));
  }
  if (!state.is_object() || state.value("format", "") != "nimbus.data.iterator/1" || !state.contains("seed") ||
      !state.contains("iteration") || !state.contains("calls") || !state.contains("pipeline")) {
    throw DataError("Iterator::restore: the saved state is not a nimbus.data.iterator/1 object");
  }
  const std::string expected = fmt::format("{:016x}", fnv1a(dataset.describe()));
  if (state["pipeline"].get<std::string>() != expected) {
    throw InvalidArgument(fmt::format("Iterator::restore: the state was saved from another pipeline (fingerprint {}, "
                                      "this pipeline's is {})",
                                      state["pipeline"].get<std::string>(), expected),
                          "restore into a dataset built exactly as the saved one: same sources and transforms");
  }
  auto impl = std::make_unique<detail::IteratorState>(dataset.node(), state["seed"].get<uint64_t>(),
                                                      state["iteration"].get<uint64_t>());
  const uint64_t calls = state["calls"].get<uint64_t>();
  for (uint64_t i = 0; i < calls; ++i) {
    try {
      if (!impl->next()) break;
    } catch (const Error&) {
      // The saved iterator saw this error too and went on; so do we.
    }
  }
  return Iterator(std::move(impl));
}

}  // namespace nimbus::data
