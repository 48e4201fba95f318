// fused_elementwise on the CPU: the output's flat index range is cut into
// blocks; for each block every instruction runs its own op's best kernel on
// block-sized views (inputs sliced or, when they broadcast, gathered into a
// scratch block), so intermediates live in a thread's scratch (L2) instead
// of round-tripping through memory. Blocks run in parallel on the compute pool.
//
// f16 and bf16 values are held in f32 (this CPU family has no 16-bit
// arithmetic): a 16-bit input is widened once per block, every instruction
// runs its f32 kernel, and a value is rounded to 16 bits only where the
// program says so: at a cast to f16/bf16 (rounded in place, still held in
// f32) and at a 16-bit output's store (fused_elementwise.h). A cast from
// 16 bits to f32 costs nothing: the f32 value is already there.
#include <algorithm>
#include <cstring>
#include <optional>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/kernel_util.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/half_convert.h"
#include "src/kernels/cpu/parallel.h"

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

// The dtype a value is held in while a block is computed.
DType held_dtype(DType dtype) { return is_16_bit_float(dtype) ? DType::kF32 : dtype; }

// What an instruction does in a block besides running its op's kernel on held values.
struct Step {
  bool aliases_operand = false;     // a cast whose held value is its operand's: no work
  std::optional<Attrs> held_attrs;  // a cast to f16/bf16: runs as a cast to f32 (then rounds)
  bool rounds = false;              // rounds its held f32 result to its 16-bit dtype
};

Step step_for(const ExpressionInstruction& instruction, DType operand_dtype) {
  static const OpSchema& cast = OpRegistry::global().get("cast");
  Step step;
  if (instruction.op != &cast) return step;
  const DType target = instruction.dtype;
  // A cast to f16/bf16 from any other dtype rounds; a cast between dtypes held alike is the operand itself.
  step.rounds = is_16_bit_float(target) && operand_dtype != target;
  step.aliases_operand = !step.rounds && held_dtype(operand_dtype) == held_dtype(target);
  if (held_dtype(target) != target) step.held_attrs = Attrs{{"dtype", held_dtype(target)}};
  return step;
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
  std::vector<Step> steps(temps);
  for (size_t t = 0; t < temps; ++t) {
    const ExpressionInstruction& instruction = program->instructions[t];
    const ExpressionOperand& first = instruction.operands.at(0);
    const DType operand_dtype = first.is_input ? ctx.inputs[static_cast<size_t>(first.index)].dtype()
                                               : program->instructions[static_cast<size_t>(first.index)].dtype;
    steps[t] = step_for(instruction, operand_dtype);
  }

  // Scratch per thread (fused_elementwise_scratch_bytes, which the memory accounting calls, counts the
  // same): a block in the input's dtype per gathered input, an f32 block per f16/bf16 input, and a block
  // per instruction result in the dtype it is held in.
  size_t scratch_bytes = 0;
  std::vector<size_t> gather_slot(inputs), wide_slot(inputs), temp_slot(temps);
  for (size_t i = 0; i < inputs; ++i) {
    const DType dtype = ctx.inputs[i].dtype();
    gather_slot[i] = scratch_bytes;
    const bool gathered = feeds[i].kind == InputFeed::Kind::kRows || feeds[i].kind == InputFeed::Kind::kGather;
    if (gathered) scratch_bytes += kBlock * dtype_size(dtype);
    wide_slot[i] = scratch_bytes;
    if (is_16_bit_float(dtype)) scratch_bytes += kBlock * sizeof(float);
  }
  for (size_t t = 0; t < temps; ++t) {
    temp_slot[t] = scratch_bytes;
    scratch_bytes += kBlock * dtype_size(held_dtype(program->instructions[t].dtype));
  }

  // Which output, if any, the program's last instruction writes in place: one held as it is stored.
  int last_output = -1;
  for (size_t k = 0; k < program->outputs.size(); ++k) {
    if (program->outputs[k] == static_cast<int>(temps) - 1 && !is_16_bit_float(ctx.outputs[k].dtype()) &&
        !steps[temps - 1].aliases_operand) {
      last_output = static_cast<int>(k);
    }
  }

  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Blocks per thread below which the program stays on the calling thread: a short program is a
  // memory-bound pass (kMemoryBoundGrain elements per fork), a long one forks from a block on (a
  // relu gradient's two instructions over 32 x 512 elements stay on one thread).
  const int64_t grain = std::max<int64_t>(1, kMemoryBoundGrain / (kBlock * static_cast<int64_t>(temps)));
  parallel_for(blocks, grain, [&](int64_t first_block, int64_t last_block) {
    const std::shared_ptr<Storage>& scratch = thread_scratch(scratch_bytes);
    auto* scratch_bytes_at = static_cast<std::byte*>(scratch->data());
    std::vector<TensorImpl> input_views(inputs), temp_views(temps);
    std::vector<Tensor> input_tensors(inputs), temp_tensors(temps), operands;
    auto view = [&](TensorImpl& impl, const std::shared_ptr<Storage>& storage, size_t offset, DType dtype,
                    Shape view_shape) {
      impl.shape = view_shape;
      impl.dtype = dtype;
      impl.device = storage->device();
      impl.storage = storage;
      impl.offset = offset;
      return borrow(impl);
    };
    // A 16-bit scalar is widened once for the thread's blocks.
    std::vector<Tensor> held_scalars = scalars;
    for (size_t i = 0; i < inputs; ++i) {
      if (feeds[i].kind != InputFeed::Kind::kScalar || !is_16_bit_float(ctx.inputs[i].dtype())) continue;
      widen(ctx.inputs[i].dtype(), ctx.inputs[i].raw_data(), reinterpret_cast<float*>(scratch_bytes_at + wide_slot[i]),
            1);
      held_scalars[i] = view(input_views[i], scratch, wide_slot[i], DType::kF32, Shape{});
    }
    for (int64_t block = first_block; block < last_block; ++block) {
      const int64_t begin = block * kBlock;
      const int64_t length = std::min(kBlock, n - begin);
      for (size_t i = 0; i < inputs; ++i) {
        const Tensor& input = ctx.inputs[i];
        const TensorImpl& source = *input.impl_ptr();
        const DType dtype = input.dtype();
        if (feeds[i].kind == InputFeed::Kind::kScalar) {
          input_tensors[i] = held_scalars[i];
          continue;
        }
        const std::byte* block_data = nullptr;
        if (feeds[i].kind == InputFeed::Kind::kSlice) {
          block_data = static_cast<const std::byte*>(input.raw_data()) + static_cast<size_t>(begin) * dtype_size(dtype);
          if (!is_16_bit_float(dtype)) {
            input_tensors[i] =
                view(input_views[i], source.storage, source.offset + static_cast<size_t>(begin) * dtype_size(dtype),
                     dtype, Shape{length});
            continue;
          }
        } else {
          gather_block(input, feeds[i], shape, begin, begin + length, scratch_bytes_at + gather_slot[i]);
          block_data = scratch_bytes_at + gather_slot[i];
          if (!is_16_bit_float(dtype)) {
            input_tensors[i] = view(input_views[i], scratch, gather_slot[i], dtype, Shape{length});
            continue;
          }
        }
        widen(dtype, block_data, reinterpret_cast<float*>(scratch_bytes_at + wide_slot[i]), length);
        input_tensors[i] = view(input_views[i], scratch, wide_slot[i], DType::kF32, Shape{length});
      }
      for (size_t t = 0; t < temps; ++t) {
        const ExpressionInstruction& instruction = program->instructions[t];
        const Step& step = steps[t];
        operands.clear();
        for (const ExpressionOperand& operand : instruction.operands) {
          operands.push_back(operand.is_input ? input_tensors[static_cast<size_t>(operand.index)]
                                              : temp_tensors[static_cast<size_t>(operand.index)]);
        }
        if (step.aliases_operand) {
          temp_tensors[t] = operands[0];
          continue;
        }
        // The last instruction reads what it needs before writing each element, so it may write
        // its output in place; earlier results go to scratch (a later one may still read an input
        // whose memory an output reuses).
        if (t + 1 == temps && last_output >= 0) {
          const Tensor& out = ctx.outputs[static_cast<size_t>(last_output)];
          const TensorImpl& target = *out.impl_ptr();
          temp_tensors[t] =
              view(temp_views[t], target.storage, target.offset + static_cast<size_t>(begin) * dtype_size(out.dtype()),
                   out.dtype(), Shape{length});
        } else {
          temp_tensors[t] = view(temp_views[t], scratch, temp_slot[t], held_dtype(instruction.dtype), Shape{length});
        }
        KernelContext inner{*instruction.op, step.held_attrs ? *step.held_attrs : instruction.attrs, operands,
                            std::span<Tensor>(&temp_tensors[t], 1), ctx.stream};
        select_kernel(inner).fn(inner);
        if (step.rounds) round_to(instruction.dtype, static_cast<float*>(temp_tensors[t].raw_data()), length);
      }
      // The other outputs are stored last, after every read of this block's inputs: 16-bit ones rounded.
      for (size_t k = 0; k < ctx.outputs.size(); ++k) {
        if (static_cast<int>(k) == last_output) continue;
        const Tensor& result = temp_tensors[static_cast<size_t>(program->outputs[k])];
        const DType dtype = ctx.outputs[k].dtype();
        std::byte* out =
            static_cast<std::byte*>(ctx.outputs[k].raw_data()) + static_cast<size_t>(begin) * dtype_size(dtype);
        if (is_16_bit_float(dtype)) {
          narrow(static_cast<const float*>(result.raw_data()), dtype, out, length);
        } else {
          std::memcpy(out, result.raw_data(), static_cast<size_t>(length) * dtype_size(dtype));
        }
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
