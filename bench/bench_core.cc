// Engine-core throughput against the machine's ceilings, in one binary so
// that every figure is taken side by side on the same threads:
//   matmul_nimbus/N   nimbus::matmul on N x N f32, the output allocated per call as a user would;
//   matmul_onednn/N   oneDNN's matmul primitive called directly, as /work/shared/peers/c/sgemm_dnnl.cpp;
//   add|relu|gelu_nimbus/N         the op's dispatched kernel into a preallocated output
//                                  (run_kernel, the graph executor's path: steady state, pages touched);
//                                  inputs and outputs are made once per size and reused by repetitions;
//   add|relu|gelu_nimbus_alloc/N   the public op (nimbus::add, ...), a fresh output per call, so the
//                                  page faults of first-touching it count;
//   triad/N       a[i] = b[i] + s c[i] on f32, OpenMP static schedule, plain stores (STREAM);
//   triad_nt/N    the same with streaming stores: the bandwidth the machine gives without write-allocate.
// Bandwidth counts bytes read + written per element as STREAM does (triad and
// add 3 x 4 B, relu and gelu 2 x 4 B), never the read-for-ownership a plain
// store adds. bench/run_core.sh runs this and prints the ratios.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>

#include "nimbus/nimbus.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace {

using nimbus::Tensor;

// Inputs of n elements, made once per size and process: repetitions reuse them
// instead of paying again for the random draws and the first touch of their pages.
Tensor uniform(int64_t n, int index = 0) {
  static std::map<std::pair<int64_t, int>, Tensor> cache;
  auto [it, inserted] = cache.try_emplace({n, index});
  if (inserted) it->second = nimbus::random_uniform({n}, -2.0, 2.0);
  return it->second;
}

void set_gflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(n * n * n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void set_bandwidth(benchmark::State& state, int64_t bytes) {
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void matmul_nimbus(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = nimbus::random_uniform({n, n}, -0.5, 0.5);
  const Tensor b = nimbus::random_uniform({n, n}, -0.5, 0.5);
  benchmark::DoNotOptimize(nimbus::matmul(a, b));  // creates and caches the primitive
  for (auto _ : state) benchmark::DoNotOptimize(nimbus::matmul(a, b));
  set_gflops(state, n);
}

void matmul_onednn(benchmark::State& state) {
  const int64_t n = state.range(0);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::desc md({n, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::memory a(md, engine), b(md, engine), c(md, engine);
  auto* pa = static_cast<float*>(a.get_data_handle());
  auto* pb = static_cast<float*>(b.get_data_handle());
  for (int64_t i = 0; i < n * n; ++i) {
    pa[i] = static_cast<float>(std::rand()) / RAND_MAX - 0.5f;
    pb[i] = static_cast<float>(std::rand()) / RAND_MAX - 0.5f;
  }
  const dnnl::matmul matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), engine));
  const std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  matmul.execute(stream, args);
  stream.wait();
  for (auto _ : state) {
    matmul.execute(stream, args);
    stream.wait();
  }
  set_gflops(state, n);
}

// An elementwise op through its dispatched kernel into preallocated outputs.
void elementwise_nimbus(benchmark::State& state, const char* op_name, int inputs_count, nimbus::Attrs attrs) {
  const int64_t n = state.range(0);
  const nimbus::OpSchema& op = nimbus::OpRegistry::global().get(op_name);
  std::vector<Tensor> inputs;
  for (int i = 0; i < inputs_count; ++i) inputs.push_back(uniform(n, i));
  std::vector<Tensor> outputs = {uniform(n, 2)};
  nimbus::run_kernel(op, attrs, inputs, outputs);  // touches the output's pages
  for (auto _ : state) {
    nimbus::run_kernel(op, attrs, inputs, outputs);
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, (inputs_count + 1) * 4 * n);
}

void add_nimbus(benchmark::State& state) { elementwise_nimbus(state, "add", 2, {}); }
void relu_nimbus(benchmark::State& state) { elementwise_nimbus(state, "relu", 1, {}); }
void gelu_nimbus(benchmark::State& state) {
  elementwise_nimbus(state, "gelu", 1, {{"approximate", std::string("tanh")}});
}

void add_nimbus_alloc(benchmark::State& state) {
  const Tensor a = uniform(state.range(0), 0), b = uniform(state.range(0), 1);
  for (auto _ : state) benchmark::DoNotOptimize(nimbus::add(a, b));
  set_bandwidth(state, 3 * 4 * state.range(0));
}
void relu_nimbus_alloc(benchmark::State& state) {
  const Tensor x = uniform(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nimbus::relu(x));
  set_bandwidth(state, 2 * 4 * state.range(0));
}
void gelu_nimbus_alloc(benchmark::State& state) {
  const Tensor x = uniform(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nimbus::gelu(x, "tanh"));
  set_bandwidth(state, 2 * 4 * state.range(0));
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

Buffer aligned_floats(int64_t n) {
  return Buffer(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * sizeof(float))));
}

struct TriadArrays {
  Buffer a, b, c;
};

// STREAM's triad arrays of n f32, first touched in parallel by the threads that use them; made once per size.
const TriadArrays& triad_arrays(int64_t n) {
  static std::map<int64_t, TriadArrays> cache;
  auto [it, inserted] = cache.try_emplace(n);
  if (inserted) {
    it->second = {aligned_floats(n), aligned_floats(n), aligned_floats(n)};
    float *a = it->second.a.get(), *b = it->second.b.get(), *c = it->second.c.get();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      a[i] = 0;
      b[i] = 1;
      c[i] = 2;
    }
  }
  return it->second;
}

void triad(benchmark::State& state, bool streaming_stores) {
  const int64_t n = state.range(0);
  const TriadArrays& arrays = triad_arrays(n);
  float* pa = arrays.a.get();
  const float* pb = arrays.b.get();
  const float* pc = arrays.c.get();
  const float s = 3.0f;
  for (auto _ : state) {
    if (streaming_stores) {
#if defined(__AVX__)
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; i += 8) {
        const __m256 v = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_load_ps(pc + i), _mm256_load_ps(pb + i));
        _mm256_stream_ps(pa + i, v);
      }
      _mm_sfence();
#endif
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    }
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, 3 * 4 * n);
}
void triad_plain(benchmark::State& state) { triad(state, false); }
void triad_streaming(benchmark::State& state) { triad(state, true); }

constexpr int64_t kSmall = int64_t{1} << 24, kLarge = int64_t{1} << 26;

}  // namespace

BENCHMARK(matmul_nimbus)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(matmul_onednn)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(triad_plain)->Name("triad")->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(triad_streaming)->Name("triad_nt")->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(add_nimbus)->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(relu_nimbus)->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(gelu_nimbus)->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(add_nimbus_alloc)->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(relu_nimbus_alloc)->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(gelu_nimbus_alloc)->Arg(kSmall)->Arg(kLarge)->UseRealTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  // Measure with the OpenMP settings Nimbus's programs run with.
  nimbus::reexec_with_omp_defaults(argc, argv);
  // All cores, as a user's default; OMP_NUM_THREADS overrides both Nimbus and oneDNN alike.
  nimbus::RuntimeOptions options;
  options.threads = std::getenv("OMP_NUM_THREADS") != nullptr ? omp_get_max_threads() : 0;
  nimbus::configure_runtime(options);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("compute_threads", std::to_string(nimbus::compute_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
