// Where fit's batches come from: tensors held in memory (fit(x, y), shuffled by index each
// epoch) or an input pipeline (fit(dataset), one iteration of it per epoch). The fit loop in
// trainer.cc is the same for both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/data/dataset.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::train {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Batches in one epoch, or -1 when only the end of an epoch tells.
  virtual int64_t batches_per_epoch() const = 0;
  // Starts epoch `epoch` (1-based) with the run's shuffle seed, at batch `first_step` (resuming).
  virtual void begin_epoch(int epoch, uint64_t seed, int64_t first_step) = 0;
  // The next (x, y) batch of the epoch, or nullopt at its end.
  virtual std::optional<std::pair<Tensor, Tensor>> next() = 0;
  // What a checkpoint records to continue this epoch exactly; empty when the epoch and step suffice.
  virtual std::string position() const { return {}; }
  // The input pipeline's statistics (data::Iterator::stats_json), empty for tensors.
  virtual std::string stats_json() const { return {}; }
};

// fit(x, y): rows of x and y in batches of batch_size, in an order shuffled with (seed, epoch).
class TensorBatches final : public BatchSource {
 public:
  TensorBatches(const Tensor& x, const Tensor& y, int64_t batch_size, bool shuffle);
  int64_t batches_per_epoch() const override;
  void begin_epoch(int epoch, uint64_t seed, int64_t first_step) override;
  std::optional<std::pair<Tensor, Tensor>> next() override;

 private:
  const Tensor& x_;
  const Tensor& y_;
  int64_t batch_size_;
  bool shuffle_;
  std::vector<int64_t> order_;
  int64_t next_step_ = 0;
};

// fit(dataset): epoch e is the dataset's iteration e - 1 with the run's seed (Dataset::iterator),
// so every process sees the same batches; a resumed epoch restores the checkpoint's iterator
// position (or replays to first_step when the checkpoint has none).
class DatasetBatches final : public BatchSource {
 public:
  DatasetBatches(const data::Dataset& dataset, std::string resume_position);
  int64_t batches_per_epoch() const override;
  void begin_epoch(int epoch, uint64_t seed, int64_t first_step) override;
  std::optional<std::pair<Tensor, Tensor>> next() override;
  std::string position() const override;
  std::string stats_json() const override;

 private:
  const data::Dataset& dataset_;
  std::string resume_position_;   // used by the first epoch that starts mid-way
  mutable bool saveable_ = true;  // false once save() said the order depends on thread timing
  std::optional<data::Iterator> iterator_;
};

}  // namespace nimbus::train
