// fused_elementwise on the CPU: the output's flat index range is cut into
// blocks; for each block every instruction runs its own op's best kernel on
// block-sized views (inputs sliced or, when they broadcast, gathered into a
// scratch block), so intermediates live in a thread's scratch (L2) instead
// of round-tripping through memory, and each element gets exactly the value
// the unfused kernels would give it. Blocks run in parallel on the compute pool.
#include <algorithm>
#include <cstring>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/registry.h"
#include "src/device/cpu/parallel.h"
#include "src/ops/internal/kernel_util.h"

namespace nimbus::cpu {
namespace {

// Elements per block: a few temporaries of this size stay in a core's L2.
constexpr int64_t kBlock = kFusedBlockElements;

// A tensor handle over caller-owned TensorImpl storage: views made per block without heap allocation.
Tensor borrow(TensorImpl& impl) { return Tensor(std::shared_ptr<TensorImpl>(std::shared_ptr<void>(), &impl)); }

// How one fused input feeds a block.
struct InputFeed {
  enum class Kind {
    kSlice,   // same shape as the fused op: the block is a slice of it
    kScalar,  // one element: passed whole, the ops broadcast it themselves
    kRows,    // a trailing part of the fused shape (a bias): repeats every `period` elements
    kGather,  // any other broadcast: gathered element by element
  } kind = Kind::kSlice;
  int64_t period = 0;
  std::array<int64_t, kMaxRank> strides{};  // kGather: broadcast strides over the fused shape
};

InputFeed feed_for(const Tensor& input, const Shape& shape) {
  InputFeed feed;
  if (input.shape() == shape) return feed;
  if (input.numel() == 1) {
    feed.kind = InputFeed::Kind::kScalar;
    return feed;
  }
  // Leading 1s aside, is the input's shape the trailing axes of the fused shape?
  const auto dims = input.shape().dims();
  size_t first = 0;
  while (first < dims.size() && dims[first] == 1) ++first;
  const size_t kept = dims.size() - first;
  bool trailing = kept <= static_cast<size_t>(shape.rank());
  for (size_t i = 0; trailing && i < kept; ++i) {
    trailing = dims[first + i] == shape.dims()[static_cast<size_t>(shape.rank()) - kept + i];
  }
  if (trailing) {
    feed.kind = InputFeed::Kind::kRows;
    feed.period = input.numel();
    return feed;
  }
  feed.kind = InputFeed::Kind::kGather;
  feed.strides = internal::broadcast_strides(input.shape(), shape);
  return feed;
}

// Copies the broadcast elements of `input` for flat positions [begin, end) of `shape` into dst.
void gather_block(const Tensor& input, const InputFeed& feed, const Shape& shape, int64_t begin, int64_t end,
                  std::byte* dst) {
  const int64_t width = static_cast<int64_t>(dtype_size(input.dtype()));
  const auto* src = static_cast<const std::byte*>(input.raw_data());
  if (feed.kind == InputFeed::Kind::kRows) {
    for (int64_t j = begin; j < end;) {
      const int64_t phase = j % feed.period;
      const int64_t run = std::min(feed.period - phase, end - j);
      std::memcpy(dst + (j - begin) * width, src + phase * width, static_cast<size_t>(run * width));
      j += run;
    }
    return;
  }
  // Walk the multi-index incrementally instead of dividing per element.
  std::array<int64_t, kMaxRank> index{};
  int64_t rest = begin;
  for (int axis = shape.rank() - 1; axis >= 0; --axis) {
    index[static_cast<size_t>(axis)] = rest % shape.dims()[axis];
    rest /= shape.dims()[axis];
  }
  int64_t offset = 0;
  for (int axis = 0; axis < shape.rank(); ++axis) {
    offset += index[static_cast<size_t>(axis)] * feed.strides[static_cast<size_t>(axis)];
  }
  for (int64_t j = begin; j < end; ++j) {
    std::memcpy(dst + (j - begin) * width, src + offset * width, static_cast<size_t>(width));
    for (int axis = shape.rank() - 1; axis >= 0; --axis) {
      const size_t a = static_cast<size_t>(axis);
      offset += feed.strides[a];
      if (++index[a] < shape.dims()[axis]) break;
      offset -= feed.strides[a] * index[a];
      index[a] = 0;
    }
  }
}

// Each compute thread keeps its scratch between calls: allocating (and first
// touching) it per call would cost more than the fused work on small tensors.
const std::shared_ptr<Storage>& thread_scratch(size_t bytes) {
  thread_local std::shared_ptr<Storage> scratch;
  if (scratch == nullptr || scratch->bytes() < bytes) scratch = std::make_shared<Storage>(Device::cpu(), bytes);
  return scratch;
}

void fused_kernel(KernelContext& ctx) {
  const auto* program = dynamic_cast<const ExpressionProgram*>(ctx.attrs.get_object("program").get());
  const Shape& shape = ctx.attrs.get_shape("shape");
  const int64_t n = shape.numel();
  const size_t inputs = ctx.inputs.size();
  const size_t temps = program->instructions.size();
  std::vector<InputFeed> feeds;
  // One-element inputs go to the ops as rank-0 tensors, which every op broadcasts.
  std::vector<Tensor> scalars(inputs);
  for (size_t i = 0; i < inputs; ++i) {
    const Tensor& input = ctx.inputs[i];
    feeds.push_back(feed_for(input, shape));
    if (feeds[i].kind == InputFeed::Kind::kScalar) {
      scalars[i] = Tensor::view(input.impl_ptr()->storage, input.impl_ptr()->offset, Shape{}, input.dtype());
    }
  }

  // Scratch per thread: a block-sized slot per gathered input and per instruction result
  // (fused_elementwise_scratch_bytes, which the memory accounting calls, counts the same).
  size_t scratch_bytes = 0;
  std::vector<size_t> input_slot(inputs), temp_slot(temps);
  for (size_t i = 0; i < inputs; ++i) {
    input_slot[i] = scratch_bytes;
    const bool gathered = feeds[i].kind == InputFeed::Kind::kRows || feeds[i].kind == InputFeed::Kind::kGather;
    if (gathered) scratch_bytes += kBlock * dtype_size(ctx.inputs[i].dtype());
  }
  for (size_t t = 0; t < temps; ++t) {
    temp_slot[t] = scratch_bytes;
    scratch_bytes += kBlock * dtype_size(program->instructions[t].dtype);
  }

  // Which output, if any, the program's last instruction produces.
  int last_output = -1;
  for (size_t k = 0; k < program->outputs.size(); ++k) {
    if (program->outputs[k] == static_cast<int>(temps) - 1) last_output = static_cast<int>(k);
  }

  const int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(blocks, 1, [&](int64_t first_block, int64_t last_block) {
    const std::shared_ptr<Storage>& scratch = thread_scratch(scratch_bytes);
    auto* scratch_bytes_at = static_cast<std::byte*>(scratch->data());
    std::vector<TensorImpl> input_views(inputs), temp_views(temps);
    std::vector<Tensor> input_tensors(inputs), temp_tensors(temps), operands;
    for (int64_t block = first_block; block < last_block; ++block) {
      const int64_t begin = block * kBlock;
      const int64_t length = std::min(kBlock, n - begin);
      auto view = [&](TensorImpl& impl, const std::shared_ptr<Storage>& storage, size_t offset, DType dtype) {
        impl.shape = Shape{length};
        impl.dtype = dtype;
        impl.device = storage->device();
        impl.storage = storage;
        impl.offset = offset;
        return borrow(impl);
      };
      for (size_t i = 0; i < inputs; ++i) {
        const Tensor& input = ctx.inputs[i];
        const TensorImpl& source = *input.impl_ptr();
        if (feeds[i].kind == InputFeed::Kind::kScalar) {
          input_tensors[i] = scalars[i];
        } else if (feeds[i].kind == InputFeed::Kind::kSlice) {
          input_tensors[i] =
              view(input_views[i], source.storage,
                   source.offset + static_cast<size_t>(begin) * dtype_size(input.dtype()), input.dtype());
        } else {
          gather_block(input, feeds[i], shape, begin, begin + length, scratch_bytes_at + input_slot[i]);
          input_tensors[i] = view(input_views[i], scratch, input_slot[i], input.dtype());
        }
      }
      for (size_t t = 0; t < temps; ++t) {
        const ExpressionInstruction& instruction = program->instructions[t];
        operands.clear();
        for (const ExpressionOperand& operand : instruction.operands) {
          operands.push_back(operand.is_input ? input_tensors[static_cast<size_t>(operand.index)]
                                              : temp_tensors[static_cast<size_t>(operand.index)]);
        }
        // The last instruction reads what it needs before writing each element, so it may write
        // its output in place; earlier results go to scratch (a later one may still read an input
        // whose memory an output reuses).
        if (t + 1 == temps && last_output >= 0) {
          const Tensor& out = ctx.outputs[static_cast<size_t>(last_output)];
          const TensorImpl& target = *out.impl_ptr();
          temp_tensors[t] = view(temp_views[t], target.storage,
                                 target.offset + static_cast<size_t>(begin) * dtype_size(out.dtype()), out.dtype());
        } else {
          temp_tensors[t] = view(temp_views[t], scratch, temp_slot[t], instruction.dtype);
        }
        KernelContext inner{*instruction.op, instruction.attrs, operands, std::span<Tensor>(&temp_tensors[t], 1),
                            ctx.stream};
        select_kernel(inner).fn(inner);
      }
      // The other outputs are copied last, after every read of this block's inputs.
      for (size_t k = 0; k < ctx.outputs.size(); ++k) {
        if (static_cast<int>(k) == last_output) continue;
        const size_t t = static_cast<size_t>(program->outputs[k]);
        const size_t width = dtype_size(program->instructions[t].dtype);
        std::memcpy(static_cast<std::byte*>(ctx.outputs[k].raw_data()) + static_cast<size_t>(begin) * width,
                    scratch_bytes_at + temp_slot[t], static_cast<size_t>(length) * width);
      }
    }
  });
}

// Above the reference kernel (which runs whole tensors op by op).
const bool kRegistered =
    register_kernel("fused_elementwise", {.name = "blocked",
                                          .device = DeviceType::kCPU,
                                          .dtypes = {DType::kF32, DType::kF16, DType::kBF16, DType::kBool},
                                          .priority = 50,
                                          .fn = fused_kernel});

}  // namespace
}  // namespace nimbus::cpu
