// Dataset: tf.data-style input pipelines. A dataset is an immutable recipe;
// an Iterator runs it, on the pipeline's own threads (never the OpenMP
// compute pool), and yields elements: tuples of tensors.
//
//   using namespace nimbus::data;
//   Dataset ds = Dataset::tfrecord(list_files_sorted("train-*.tfrecord.gz"), Compression::kGzip)
//                    .map(parse_example_fn({fixed("image", FeatureType::kBytes), fixed("label", FeatureType::kInt64)}),
//                         kAutotune)
//                    .shuffle(10000, /*seed=*/42)
//                    .batch(128, /*drop_remainder=*/true)
//                    .prefetch(kAutotune);
//   Iterator it = ds.iterator();
//   while (auto batch = it.next()) { train_step((*batch)[0], (*batch)[1]); }
//   std::cout << it.stats();          // per-stage counters and what AUTOTUNE chose
//   std::string state = it.save();    // resume later: Iterator::restore(ds, state)
//
// Strings (file names, text lines, serialized records, bytes features) are
// rank-1 u8 tensors: make them with string_tensor() and read them with
// tensor_string().
//
// Errors: a failing map function, a corrupt record or a bad CSV row makes
// next() throw (a nimbus::Error naming the file, record and byte offset where
// there is one); the iterator stays usable and the following next() carries
// on after the bad element where the source can (ignore_errors() does that
// for you and counts what it skipped). Destroying an iterator mid-epoch stops
// its threads promptly: it waits only for map calls already running.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::data {

// One element of a dataset: its components, in order.
using Element = std::vector<Tensor>;

// Passed as num_parallel_calls or a prefetch buffer size: let the pipeline
// choose, from measured stage times and the consumer's demand.
inline constexpr int kAutotune = -1;

// cardinality(): a count, or one of these.
inline constexpr int64_t kInfiniteCardinality = -1;
inline constexpr int64_t kUnknownCardinality = -2;

enum class Compression { kNone, kZlib, kGzip };

namespace detail {
class DatasetNode;
class IteratorState;
}  // namespace detail

class Dataset;
class Iterator;

// Runs on each element (map, filter, flat_map). May be called from several
// pipeline threads at once when num_parallel_calls > 1.
using MapFn = std::function<Element(const Element&)>;
using FilterFn = std::function<bool(const Element&)>;
using FlatMapFn = std::function<Dataset(const Element&)>;
// from_generator: called once per iteration to start a fresh generator, which
// returns the next element or nullopt at the end.
using GeneratorFn = std::function<std::optional<Element>()>;
using GeneratorFactory = std::function<GeneratorFn()>;
// ignore_errors(on_error): called with each error and how many the iteration
// has met so far (this one included). Returning skips the element; throwing
// ends the iteration's next() with what it threw (a threshold, a rewording).
using ErrorHandler = std::function<void(const Error& error, int64_t count)>;

struct CsvOptions {
  enum class Type { kF32, kF64, kI32, kI64, kString };
  // One per column; the row's elements are scalars (strings: u8 rank 1).
  std::vector<Type> column_types;
  bool header = true;  // skip the first line of each file
  char delimiter = ',';
  // Names for the columns in error messages (optional; else "column 2").
  std::vector<std::string> column_names;
  // nan, inf and infinity (any case, any sign) in float columns; refused
  // (a DataError naming the file, line and column) unless allowed.
  bool allow_non_finite = false;
  // Appends a string component naming the row's file and line
  // ("CSV file 'a.csv', line 7"), for the messages of later steps' errors.
  bool with_origin = false;
};

class Dataset {
 public:
  // ---- sources ----

  // One element: `components` itself.
  static Dataset from_tensors(Element components);
  // Slices along the first axis: element i is (c[i] for c in components); all
  // components must have the same first dimension.
  static Dataset from_tensor_slices(Element components);
  // Elements from a C++ callable; `make_generator` runs once per iteration.
  static Dataset from_generator(GeneratorFactory make_generator, std::string name = "generator");
  // i64 scalars start, start + step, ... (stop excluded), like Python's range.
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  static Dataset range(int64_t stop) { return range(0, stop); }
  // IDX files (MNIST format, gzip or plain), read whole and sliced along the
  // first axis; several files zip (images, labels).
  static Dataset idx(const std::vector<std::string>& paths);
  // Lines of text files (gzip or plain), without the line end, as strings.
  static Dataset text_line(std::vector<std::string> paths);
  // Paths matching a glob pattern (or several), as strings: sorted, then
  // shuffled with `seed` when `shuffle` (a different order each iteration
  // unless seed is set). No match is a NotFound naming the pattern.
  static Dataset list_files(std::vector<std::string> patterns, bool shuffle = true,
                            std::optional<uint64_t> seed = std::nullopt);
  // Records of TFRecord files, as strings (see tfrecord.h for the framing).
  // with_origin: elements are (record, origin), origin a string naming the
  // file, record index and byte offset ("TFRecord file 'a.tfrecord', record
  // 3 at byte offset 1234") for the messages of later steps' errors.
  static Dataset tfrecord(std::vector<std::string> paths, Compression compression = Compression::kNone,
                          bool with_origin = false);
  // Rows of CSV files (RFC 4180 quoting: "a,b" and "say ""hi"""; quoted
  // fields may span lines); a row with the wrong number of columns or an
  // unparsable number is a DataError naming file, line and byte offset.
  static Dataset csv(std::vector<std::string> paths, CsvOptions options);

  // ---- transforms ----

  // fn on each element. num_parallel_calls: 1 runs on the consumer's thread;
  // N > 1 or kAutotune run calls on the pipeline's thread pool. deterministic
  // = false lets a fast element overtake a slow one.
  Dataset map(MapFn fn, int num_parallel_calls = 1, bool deterministic = true, std::string name = "map") const;
  Dataset filter(FilterFn predicate) const;
  // fn maps each element to a dataset; their elements follow one another.
  Dataset flat_map(FlatMapFn fn) const;
  // Like flat_map, but draws from cycle_length inner datasets in turn,
  // block_length elements at a time. num_parallel_calls = N > 1 reads up to
  // N of the open inner datasets ahead, each on its own thread (kAutotune:
  // one per core); the order stays the deterministic round robin.
  Dataset interleave(FlatMapFn fn, int cycle_length, int block_length = 1, int num_parallel_calls = 1) const;
  // Uniform draws from a buffer of buffer_size elements. seed unset: a random
  // seed per iterator. reshuffle_each_iteration: each new iteration (and each
  // epoch of repeat) gets another order, still determined by the seed.
  Dataset shuffle(int64_t buffer_size, std::optional<uint64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;
  // Stacks batch_size consecutive elements along a new first axis; the
  // components' shapes must agree. The last short batch is dropped when
  // drop_remainder.
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // Like batch, padding each component to the largest shape in the batch (or
  // to padded_shapes, where given; -1 = largest) with padding_values (0).
  Dataset padded_batch(int64_t batch_size, std::vector<Shape> padded_shapes = {},
                       std::vector<double> padding_values = {}, bool drop_remainder = false) const;
  // The inverse of batch: slices each element along its first axis.
  Dataset unbatch() const;
  // The first pass reads the input and keeps its elements; later passes read
  // the cache, not the input. filename empty: in memory. Otherwise a file
  // written on the first complete pass (as `filename`.tmp, renamed at the
  // end) and read by every later iteration, also in later runs.
  Dataset cache(std::string filename = {}) const;
  // Runs the input ahead on a background thread, buffer_size elements ahead.
  Dataset prefetch(int64_t buffer_size = kAutotune) const;
  // count < 0: forever.
  Dataset repeat(int64_t count = -1) const;
  Dataset take(int64_t count) const;
  Dataset skip(int64_t count) const;
  // Every num_shards-th element starting at index: shards together hold each
  // element exactly once.
  Dataset shard(int64_t num_shards, int64_t index) const;
  // Elements side by side (components concatenated); ends with the shortest.
  static Dataset zip(const std::vector<Dataset>& datasets);
  // Prepends an i64 scalar counter (from start) to each element.
  Dataset enumerate(int64_t start = 0) const;
  // Skips elements whose production throws a nimbus::Error (corrupt records,
  // failing maps), counting them in stats(). With on_error, each error is
  // handed to it first, which may throw to stop (see ErrorHandler): a limit
  // on bad records, a log line per record.
  Dataset ignore_errors(ErrorHandler on_error = {}) const;

  // Number of elements, kInfiniteCardinality, or kUnknownCardinality.
  int64_t cardinality() const;
  // One line per node, input first: what the pipeline is.
  std::string describe() const;

  // A new iteration. Iterators of one dataset are independent.
  Iterator iterator() const;
  // Iteration number `iteration` of this dataset with base seed `seed` (for
  // random nodes without their own seed): the same elements in every process,
  // whatever iterators were made before. The trainer makes epoch e's iterator
  // as iteration e - 1, so a resumed run reshuffles as the first one did.
  Iterator iterator(uint64_t seed, uint64_t iteration) const;

  // Runs the whole dataset on the caller's thread; for tests and small data.
  std::vector<Element> collect() const;

  explicit Dataset(std::shared_ptr<const detail::DatasetNode> node);
  const std::shared_ptr<const detail::DatasetNode>& node() const { return node_; }

 private:
  std::shared_ptr<const detail::DatasetNode> node_;
};

class Iterator {
 public:
  // The next element, or nullopt at the end. Throws what the pipeline threw
  // for this element (see the header comment).
  std::optional<Element> next();

  // Per-node statistics (elements produced, busy time, time waiting on
  // input, buffer fill, parallelism and what AUTOTUNE chose and why), as a
  // text table.
  std::string stats() const;
  // The same as JSON, for the monitor.
  std::string stats_json() const;
  // Time the caller spent blocked in next() so far: the step's input wait.
  double wait_seconds() const;

  // Iterator position as JSON: the iteration's seeds and how many elements
  // were produced. restore() rebuilds the pipeline and replays it to that
  // position (a deterministic re-seek), so the elements that follow are
  // exactly those the saved iterator would have produced. Needs a
  // deterministic pipeline (a map with deterministic = false refuses).
  std::string save() const;
  static Iterator restore(const Dataset& dataset, const std::string& state);

  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  explicit Iterator(std::unique_ptr<detail::IteratorState> state);

 private:
  std::unique_ptr<detail::IteratorState> state_;
};

// ---- strings and small helpers ----

// A rank-1 u8 tensor holding the bytes of `text`.
Tensor string_tensor(std::string_view text);
// The bytes of a u8 tensor, as a string.
std::string tensor_string(const Tensor& tensor);
// A tensor for pipeline buffers in host pipeline memory (device/host_memory.h), not the device's.
Tensor host_tensor(const Shape& shape, DType dtype);

}  // namespace nimbus::data
