// GPU figures for docs/performance.md, printed as Markdown table rows
// (bench/gpu/run.sh adds the header): GEMM TFLOP/s through cuBLASLt (f32, bf16,
// f16; tf32 instead of f32 when NIMBUS_CUDA_TF32=1, which prints that row alone), an elementwise add's GB/s against the
// device-to-device copy rate, a 3x3 convolution and its backward ops through cuDNN (f32, bf16), a fused elementwise
// chain with NVRTC fusion on and off, the MLP and CNN training steps (tests/support/step_models.h) traced into
// graph mode, in samples/s with fusion off and on, and mixed precision's goal (issue 10): a transformer block and
// the example's CNN at batch 4,096 (tests/support/policy_step_models.h) under float32 and mixed_bfloat16, with
// the ratio; and the fused attention's forward + backward, causal bf16 (issue 28), against torch_train.py's
// F.scaled_dot_product_attention rows of the same shapes. Without a GPU it says why and exits 2. NIMBUS_BENCH_OPS=1
// (with NIMBUS_CUDA_SYNC=1) also prints each training step's time by op on stderr.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/op_profile.h"
#include "src/device/cuda/cuda_stream.h"
#include "tests/support/policy_step_models.h"
#include "tests/support/step_models.h"

namespace nimbus {
namespace {

// Seconds per call of `work`, after `warmup` calls, synchronizing the device around the timed loop.
double seconds_per_call(const std::function<void()>& work, int calls, int warmup = 1) {
  Stream& stream = default_stream_for(Device::cuda());
  for (int i = 0; i < warmup; ++i) work();
  stream.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) work();
  stream.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
}

void row(const std::string& what, double value, const std::string& unit, const std::string& against) {
  std::printf("| %s | %.1f %s | %s |\n", what.c_str(), value, unit.c_str(), against.c_str());
  std::fflush(stdout);  // a later row that crashes must not take this one with it
}

// f32 (tf32 when NIMBUS_CUDA_TF32=1), bf16 or f16 operands; the 16-bit ones accumulate in f32.
void gemm(int64_t n, DType dtype) {
  const Tensor a = cast(random_normal({n, n}), dtype).to(Device::cuda());
  const Tensor b = cast(random_normal({n, n}), dtype).to(Device::cuda());
  const double s = seconds_per_call([&] { (void)matmul(a, b); }, 20);
  const char* tf32 = std::getenv("NIMBUS_CUDA_TF32");
  const bool allowed = dtype == DType::kF32 && tf32 != nullptr && std::string(tf32) == "1";
  const std::string type = allowed ? "tf32" : std::string(dtype_name(dtype));
  row("GEMM " + std::to_string(n) + "³ " + type + " (cuBLASLt)", 2.0 * n * n * n / s / 1e12, "TFLOP/s",
      "PyTorch's row of the same size and type");
}

// A ResNet-style 3x3 convolution (64 -> 64 channels, 56x56, batch 64, NHWC, "same") through cuDNN:
// forward, then both backward ops, in TFLOP/s of the 2 * N * OH * OW * F * C * 3 * 3 each does.
void convolution(DType dtype) {
  const Tensor x = cast(random_normal({64, 56, 56, 64}), dtype).to(Device::cuda());
  const Tensor filter = cast(random_normal({3, 3, 64, 64}), dtype).to(Device::cuda());
  const Conv2dOptions same{.padding = "same"};
  const Tensor y = conv2d(x, filter, same);
  const double flops = 2.0 * 64 * 56 * 56 * 64 * 64 * 9;
  const std::string type(dtype_name(dtype));
  const double forward = seconds_per_call([&] { (void)conv2d(x, filter, same); }, 20);
  row("conv2d 3x3 64->64, 56x56, batch 64, NHWC " + type + " (cuDNN)", flops / forward / 1e12, "TFLOP/s",
      "the GEMM rows' rate of the same dtype");
  const double grad_x = seconds_per_call([&] { (void)conv2d_backward_input(y, filter, x.shape(), same); }, 20);
  row("conv2d_backward_input, same shape, " + type + " (cuDNN)", flops / grad_x / 1e12, "TFLOP/s", "the forward row");
  const double grad_w = seconds_per_call([&] { (void)conv2d_backward_filter(y, x, filter.shape(), same); }, 20);
  row("conv2d_backward_filter, same shape, " + type + " (cuDNN)", flops / grad_w / 1e12, "TFLOP/s", "the forward row");
}

// scaled_dot_product_attention forward + backward (gradients of q, k and v), causal, bf16, B 8 H 16 D 64:
// TFLOP/s by FlashAttention's count for a causal step (3.5 x the forward's 2 x 2 x B x H x T^2 x D / 2), and ms.
void attention(int64_t sequence) {
  constexpr int64_t kBatch = 8, kHeads = 16, kHeadSize = 64;
  const Shape shape{kBatch, kHeads, sequence, kHeadSize};
  const auto draw = [&] { return cast(random_normal(shape), DType::kBF16).to(Device::cuda()); };
  const Tensor q = draw(), k = draw(), v = draw(), grad_out = draw();
  const double s = seconds_per_call(
      [&] {
        GradientTape tape;
        for (const Tensor& x : {q, k, v}) tape.watch(x);
        const Tensor out = scaled_dot_product_attention(q, k, v, {.causal = true});
        (void)tape.gradient(out, {q, k, v}, grad_out);
      },
      20);
  const double flops = 3.5 * 2 * 2 * kBatch * kHeads * sequence * sequence * kHeadSize / 2;
  row(fmt::format("scaled_dot_product_attention forward + backward, causal bf16, B {} H {} T {} D {} (fused CUDA "
                  "kernels; {:.3f} ms)",
                  kBatch, kHeads, sequence, kHeadSize, s * 1e3),
      flops / s / 1e12, "TFLOP/s", "PyTorch's row of the same shape (F.scaled_dot_product_attention)");
}

void bandwidth(int64_t n) {
  const Tensor x = random_normal({n}).to(Device::cuda());
  const Tensor y = random_normal({n}).to(Device::cuda());
  Tensor copy = Tensor::empty(Shape{n}, DType::kF32, Device::cuda());
  const size_t bytes = static_cast<size_t>(n) * 4;
  // On the stream the timer synchronizes (a plain cudaMemcpy between device buffers returns before it is done).
  const cudaStream_t stream = cuda::cuda_stream(default_stream_for(Device::cuda())).handle();
  const double copy_s = seconds_per_call(
      [&] { (void)cudaMemcpyAsync(copy.raw_data(), x.raw_data(), bytes, cudaMemcpyDeviceToDevice, stream); }, 50);
  const double add_s = seconds_per_call([&] { (void)(x + y); }, 50);
  const double copy_rate = 2.0 * bytes / copy_s / 1e9;
  row("device-to-device copy (cudaMemcpyAsync)", copy_rate, "GB/s", "the ceiling for elementwise kernels");
  row("add, 2 reads + 1 write (NVRTC kernel)", 3.0 * bytes / add_s / 1e9, "GB/s",
      std::to_string(static_cast<int>(100 * (3.0 * bytes / add_s / 1e9) / copy_rate)) + "% of the copy rate");
}

void fusion(int64_t n) {
  const Tensor x = random_normal({n}).to(Device::cuda());
  const Tensor bias = random_normal({n}).to(Device::cuda());
  auto chain = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(in[0] * 0.5 + in[1]) * 2.0 - 1.0}; };
  for (const bool jit : {false, true}) {
    Function f = function(chain, {.name = "chain", .graph = true, .jit = jit});
    const double s = seconds_per_call([&] { (void)f({x, bias}); }, 50);
    row(std::string("relu(x*0.5+b)*2-1, ") + std::to_string(n) + " floats, fusion " + (jit ? "on" : "off"), s * 1e6,
        "µs", jit ? "one NVRTC kernel" : "five kernels");
  }
}

// Seconds per training step of `model` (forward, backward and Adam) traced into graph mode, on inputs
// resident on the GPU, after `warmup` steps (tracing, NVRTC compiles or the kernel cache, cuBLASLt's and
// cuDNN's heuristics, the arena); `loss` gets one more step's loss. Adam's step size stays that of step 1:
// the work per step is the same, and a host-to-device copy per step is not what the rows measure.
// NIMBUS_BENCH_OPS=1 also prints the step's time by op on stderr (the kernels' own only with NIMBUS_CUDA_SYNC=1).
double step_seconds(testing::Model& model, const Tensor& x, const Tensor& labels, bool jit, int steps, int warmup,
                    const std::string& name, float& loss) {
  const Device gpu = Device::cuda();
  const Tensor step_size = testing::Adam::step_size(1, 1e-3, gpu);
  testing::Model* m = &model;
  Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                           {.name = "train_step", .graph = true, .jit = jit});
  const double s = seconds_per_call([&] { (void)step({x, labels, step_size}); }, steps, warmup);
  loss = step({x, labels, step_size})[0].to(Device::cpu()).item<float>();
  if (const char* ops = std::getenv("NIMBUS_BENCH_OPS"); ops != nullptr && std::string(ops) == "1") {
    OpProfile profile;
    for (int i = 0; i < 5; ++i) (void)step({x, labels, step_size});
    default_stream_for(gpu).synchronize();
    std::fprintf(stderr, "%s, 5 steps:\n%s\n", name.c_str(), profile.to_string().c_str());
  }
  return s;
}

std::string loss_note(float loss) { return std::isfinite(loss) ? "" : "NON-FINITE LOSS; "; }

// Random inputs in [0, 1) of `batch` samples of `sample` shape and labels in [0, 10), on the GPU.
std::pair<Tensor, Tensor> classifier_batch(const Shape& sample, int64_t batch) {
  std::vector<int64_t> dims = {batch};
  for (const int64_t d : sample.dims()) dims.push_back(d);
  return {random_uniform(Shape(dims), 0, 1).to(Device::cuda()),
          cast(random_uniform({batch}, 0, 10, DType::kF64), DType::kI64).to(Device::cuda())};
}

// One training step per call, fusion off and on (the models of tests/support/step_models.h).
// Returns how many of its two rows failed.
int training(const std::string& what, const std::function<std::unique_ptr<testing::Model>()>& make, const Shape& input,
             int64_t batch) {
  int failed = 0;
  const auto [x, labels] = classifier_batch(input, batch);
  for (const bool jit : {false, true}) {
    const std::string name = what + ", batch " + std::to_string(batch) + ", graph mode, fusion " + (jit ? "on" : "off");
    try {
      std::unique_ptr<testing::Model> model = make();
      float loss = 0;
      const double s = step_seconds(*model, x, labels, jit, 50, 5, name, loss);
      row(name, batch / s, "samples/s", loss_note(loss) + "PyTorch: bench/gpu/torch_train.py rows");
    } catch (const std::exception& e) {
      // Each row on its own: fusion on still runs when fusion off failed.
      std::printf("| %s | failed | %s |\n", name.c_str(), e.what());
      std::fflush(stdout);
      ++failed;
    }
  }
  return failed;
}

// Issue 10's GPU goal: the same model's step throughput under mixed_bfloat16 against float32 (TF32 off:
// run.sh's first bench_gpu run leaves NIMBUS_CUDA_TF32 unset and cuDNN's TF32 is off by default), graph
// mode with fusion on, then the ratio. `per_sample` names what else a sample counts (tokens) and how many.
// Returns how many of its rows failed.
int mixed_precision_speedup(const std::string& what,
                            const std::function<std::unique_ptr<testing::Model>(const char* policy)>& make,
                            const Tensor& x, const Tensor& labels, int steps, const std::string& per_sample = "",
                            int64_t per_sample_count = 1) {
  const int64_t batch = x.dim(0);
  double samples_per_second[2] = {0, 0};
  const char* policies[2] = {"float32", "mixed_bfloat16"};
  int failed = 0;
  for (int p = 0; p < 2; ++p) {
    const std::string name = what + ", batch " + std::to_string(batch) + ", " + policies[p] +
                             (p == 0 ? " (no TF32)" : "") + ", graph mode, fusion on";
    try {
      std::unique_ptr<testing::Model> model = make(policies[p]);
      float loss = 0;
      const double s = step_seconds(*model, x, labels, /*jit=*/true, steps, 3, name, loss);
      samples_per_second[p] = batch / s;
      std::string against = loss_note(loss) + fmt::format("{:.2f} ms/step", s * 1e3);
      if (!per_sample.empty()) against += fmt::format("; {:.0f} {}/s", batch * per_sample_count / s, per_sample);
      row(name, batch / s, "samples/s", against);
    } catch (const std::exception& e) {
      std::printf("| %s | failed | %s |\n", name.c_str(), e.what());
      std::fflush(stdout);
      ++failed;
    }
  }
  if (failed == 0) {
    const double ratio = samples_per_second[1] / samples_per_second[0];
    std::printf(
        "| %s: mixed_bfloat16 / float32 step throughput | %.2f× | goal ≥ 2.5× (issue 10): %s; "
        "PyTorch autocast's ratio: torch_train.py rows |\n",
        what.c_str(), ratio, ratio >= 2.5 ? "holds" : "DOES NOT HOLD");
    std::fflush(stdout);
  }
  return failed;
}

}  // namespace
}  // namespace nimbus

int main() {
  using namespace nimbus;
  if (!has_backend(DeviceType::kCUDA)) {
    try {
      backend(DeviceType::kCUDA);
    } catch (const Error& e) {
      std::fprintf(stderr, "bench_gpu: no CUDA device: %s\n", e.message().c_str());
    }
    return 2;
  }
  // A row that fails prints its error and the others still run: one device call must bring back every figure it can.
  int failures = 0;
  const auto attempt = [&](const std::string& what, const std::function<void()>& work) {
    try {
      work();
    } catch (const std::exception& e) {
      ++failures;
      std::printf("| %s | failed | %s |\n", what.c_str(), e.what());
    }
  };
  // NIMBUS_CUDA_TF32=1 (read once per process by the matmul kernel): run.sh's second run, the tf32 GEMM alone.
  if (std::getenv("NIMBUS_CUDA_TF32") != nullptr) {
    attempt("GEMM tf32", [] { gemm(4096, DType::kF32); });
    return failures == 0 ? 0 : 1;
  }
  attempt("GEMM f32", [] { gemm(4096, DType::kF32); });
  attempt("GEMM bf16", [] { gemm(4096, DType::kBF16); });
  attempt("GEMM f16", [] { gemm(4096, DType::kF16); });
  attempt("GEMM 8192 bf16", [] { gemm(8192, DType::kBF16); });
  attempt("conv2d f32", [] { convolution(DType::kF32); });
  attempt("conv2d bf16", [] { convolution(DType::kBF16); });
  attempt("bandwidth", [] { bandwidth(int64_t{1} << 26); });
  attempt("fusion", [] { fusion(int64_t{1} << 24); });
  attempt("attention T 1024", [] { attention(1024); });
  attempt("attention T 4096", [] { attention(4096); });
  failures += training(
      "MLP 784-512-512-10", [] { return testing::make_mlp(Device::cuda(), 512); }, Shape{784}, 256);
  failures += training(
      "CNN 28x28x1 conv32-pool-conv64-pool-128-10", [] { return testing::make_cnn(Device::cuda()); }, Shape{28, 28, 1},
      256);
  // Issue 10's sizes, where the GPU is compute-bound rather than launch-bound.
  {
    const testing::TransformerBlockSize size;  // d_model 1024, 16 heads, sequence 512, feed-forward 4096
    const Shape shape{16, size.sequence, size.d_model};
    const Tensor x = random_normal(shape).to(Device::cuda());
    const Tensor target = random_normal(shape).to(Device::cuda());
    failures += mixed_precision_speedup(
        "transformer block (pre-LN, d_model 1024, 16 heads, sequence 512, feed-forward 4096), Adam",
        [&](const char* policy) { return testing::make_transformer_block(size, policy, Device::cuda()); }, x, target,
        20, "tokens", size.sequence);
  }
  {
    const auto [x, labels] = classifier_batch(Shape{28, 28, 1}, 4096);
    failures += mixed_precision_speedup(
        "CNN of examples/fashion_mnist_cnn.yaml (nn layers), Adam",
        [](const char* policy) { return testing::make_layer_cnn(policy, Device::cuda()); }, x, labels, 20);
  }
  return failures == 0 ? 0 : 1;
}
