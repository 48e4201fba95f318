// BatchSlots: a parallel map's results written into the rows of the batch that follows it.
#include <cstring>

#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

bool fits_row(const Tensor& buffer, const Shape& shape, DType dtype) {
  if (buffer.dtype() != dtype || buffer.rank() != shape.rank() + 1) return false;
  for (int d = 0; d < shape.rank(); ++d) {
    if (buffer.dim(d + 1) != shape[d]) return false;
  }
  return true;
}
bool fits_row(const Tensor& buffer, const Tensor& row) { return fits_row(buffer, row.shape(), row.dtype()); }

// Row `row` of `buffer` as a tensor of its own.
Tensor row_view(const Tensor& buffer, int64_t row, const Shape& shape) {
  const auto& impl = *buffer.impl_ptr();
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(buffer.dtype());
  return Tensor::view(impl.storage, impl.offset + static_cast<size_t>(row) * bytes, shape, buffer.dtype());
}

// What this thread's map call may write into (BatchRowScope).
thread_local const BatchSlots* row_slots = nullptr;
thread_local int64_t row_index = 0;
thread_local bool row_claimed = false;

// Buffers of `batch_size` rows like `element`'s components; none when they would pass kBatchUpfrontBytes
// (the batch then grows as elements arrive).
std::vector<Tensor> batch_buffers_like(const Element& element, int64_t batch_size) {
  if (element_bytes(element) * batch_size > kBatchUpfrontBytes) return {};
  std::vector<Tensor> buffers;
  for (const Tensor& component : element) {
    Shape shape{batch_size};
    for (const int64_t d : component.shape().dims()) shape.push_back(d);
    buffers.push_back(host_tensor(shape, component.dtype()));
  }
  return buffers;
}

}  // namespace

Element BatchSlots::place(int64_t index, Element element) {
  const int64_t batch = index / batch_size_, row = index % batch_size_;
  std::vector<Tensor> buffers;
  {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = buffers_.try_emplace(batch);
    if (fresh) it->second = batch_buffers_like(element, batch_size_);
    buffers = it->second;
  }
  if (buffers.size() != element.size()) return element;
  for (size_t c = 0; c < element.size(); ++c) {
    if (!fits_row(buffers[c], element[c])) return element;
  }
  // A component held in the first component's row (an op wrote it there, element_output_tensor, but it
  // is not the first component) moves out before that row is written.
  const Tensor first_row = row_view(buffers[0], row, element[0].shape());
  const auto* first_begin = static_cast<const char*>(first_row.raw_data());
  for (size_t c = 1; c < element.size(); ++c) {
    const auto* data = static_cast<const char*>(element[c].raw_data());
    if (data >= first_begin && data < first_begin + first_row.nbytes()) element[c] = element[c].clone();
  }
  Element placed;
  for (size_t c = 0; c < element.size(); ++c) {
    Tensor destination = c == 0 ? first_row : row_view(buffers[c], row, element[c].shape());
    if (destination.nbytes() > 0 && destination.raw_data() != element[c].raw_data()) {
      std::memcpy(destination.raw_data(), element[c].raw_data(), destination.nbytes());
    }
    placed.push_back(std::move(destination));
  }
  return placed;
}

std::optional<Tensor> BatchSlots::first_component_row(int64_t index, const Shape& shape, DType dtype) const {
  std::lock_guard lock(mutex_);
  const auto it = buffers_.find(index / batch_size_);
  if (it == buffers_.end() || it->second.empty() || !fits_row(it->second[0], shape, dtype)) return std::nullopt;
  return row_view(it->second[0], index % batch_size_, shape);
}

BatchRowScope::BatchRowScope(const BatchSlots* slots, int64_t index)
    : previous_slots_(row_slots), previous_index_(row_index), previous_claimed_(row_claimed) {
  row_slots = slots;
  row_index = index;
  row_claimed = false;
}

BatchRowScope::~BatchRowScope() {
  row_slots = previous_slots_;
  row_index = previous_index_;
  row_claimed = previous_claimed_;
}

ElementOutput element_output_tensor(const Shape& shape, DType dtype) {
  if (row_slots != nullptr && !row_claimed) {
    if (std::optional<Tensor> row = row_slots->first_component_row(row_index, shape, dtype)) {
      row_claimed = true;
      return {std::move(*row), true};
    }
  }
  return {host_tensor(shape, dtype), false};
}

std::vector<Tensor> BatchSlots::buffers_starting_with(const Element& element) const {
  if (element.empty()) return {};
  std::lock_guard lock(mutex_);
  for (const auto& [batch, buffers] : buffers_) {
    if (buffers.size() != element.size()) continue;
    bool starts = true;
    for (size_t c = 0; c < element.size() && starts; ++c) {
      starts = element[c].impl_ptr()->storage == buffers[c].impl_ptr()->storage &&
               element[c].raw_data() == buffers[c].raw_data() && fits_row(buffers[c], element[c]);
    }
    if (starts) return buffers;
  }
  return {};
}

void BatchSlots::taken(int64_t index) {
  const int64_t batch = index / batch_size_;
  const bool last_row = index % batch_size_ == batch_size_ - 1;
  std::lock_guard lock(mutex_);
  buffers_.erase(buffers_.begin(), buffers_.lower_bound(last_row ? batch + 1 : batch));
}

}  // namespace nimbus::data::detail
