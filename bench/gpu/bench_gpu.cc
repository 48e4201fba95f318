// GPU figures for docs/performance.md, printed as Markdown table rows
// (bench/gpu/run.sh adds the header): GEMM TFLOP/s through cuBLASLt (f32, bf16,
// f16; tf32 instead of f32 when NIMBUS_CUDA_TF32=1, which prints that row alone), an elementwise add's GB/s against the
// device-to-device copy rate, and a fused elementwise chain with NVRTC fusion
// on and off. Without a GPU it says why and exits 2.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "src/device/cuda/cuda_stream.h"

namespace nimbus {
namespace {

// Seconds per call of `work`, after a warm-up, synchronizing the device around the timed loop.
double seconds_per_call(const std::function<void()>& work, int calls) {
  Stream& stream = default_stream_for(Device::cuda());
  work();
  stream.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) work();
  stream.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
}

void row(const std::string& what, double value, const std::string& unit, const std::string& against) {
  std::printf("| %s | %.1f %s | %s |\n", what.c_str(), value, unit.c_str(), against.c_str());
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
  attempt("bandwidth", [] { bandwidth(int64_t{1} << 26); });
  attempt("fusion", [] { fusion(int64_t{1} << 24); });
  return failures == 0 ? 0 : 1;
}
