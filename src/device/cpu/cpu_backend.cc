// The CPU backend: host memory from a BFC allocator, a stream that runs work
// inline, plain memcpy for copies.
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <string>
#ifndef NIMBUS_WITHOUT_ONEDNN  // a GPU-only build (cmake/NimbusGpuOnly.cmake) runs the reference kernels
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/logical_devices.h"
#include "nimbus/device/runtime.h"

namespace nimbus {
namespace {

// The CPU's BFC allocator in growth mode (or as NIMBUS_MEMORY_MODE /
// NIMBUS_MEMORY_LIMIT say), made on first use so that a bad variable is an
// InvalidArgument from the first allocation rather than a failure at load.
// Never destroyed: tensors held by static objects may outlive any other
// owner, and the process's exit hands the memory back anyway.
BfcAllocator& cpu_allocator() {
  static BfcAllocator* const allocator =
      new BfcAllocator(Device::cpu().to_string(), make_host_sub_allocator(), apply_memory_environment({}));
  return *allocator;
}

// The processor's model name as /proc/cpuinfo gives it ("AMD EPYC 7B13"), or "CPU" where it gives none.
std::string processor_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 < line.size()) return line.substr(colon + 2);
  }
  return "CPU";
}

// Work on the CPU runs when it is enqueued, so every event has already happened.
class CpuEvent final : public Event {
 public:
  bool query() const override { return true; }
  void synchronize() const override {}
};

class CpuStream final : public Stream {
 public:
  Device device() const override { return Device::cpu(); }
  void synchronize() override {}
  std::shared_ptr<Event> record() override { return std::make_shared<CpuEvent>(); }
  void wait(const Event&) override {}
};

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::kCPU; }
  // One unless the CPU was split into logical devices (logical_devices.h); they share one allocator.
  int device_count() const override { return logical_cpu_device_count(); }

  std::string describe(int index) const override {
#ifdef NIMBUS_WITHOUT_ONEDNN
    return fmt::format("cpu:{}: {} compute threads of {} cores, reference kernels (a GPU-only build)", index,
                       compute_threads(), hardware_cores());
#else
    const dnnl_version_t* version = dnnl_version();
    return fmt::format("cpu:{}: {} compute threads of {} cores, oneDNN {}.{}.{} ({})", index,
                       logical_cpu_device_threads(index), hardware_cores(), version->major, version->minor,
                       version->patch, dnnl_cpu_isa_name(dnnl::get_effective_cpu_isa()));
#endif
  }

  std::string device_name(int) const override {
    static const std::string name = processor_name();
    return name;
  }

  Allocator& allocator(int) override { return cpu_allocator(); }
  Stream& default_stream(int) override { return stream_; }

  void copy(const void* src, Device src_device, void* dst, Device dst_device, size_t bytes, Stream&) override {
    NIMBUS_ASSERT(src_device.is_cpu() && dst_device.is_cpu())
        << "the CPU backend copies only host memory: " << src_device.to_string() << " -> " << dst_device.to_string();
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }

 private:
#ifndef NIMBUS_WITHOUT_ONEDNN
  static const char* dnnl_cpu_isa_name(dnnl::cpu_isa isa) {
    switch (isa) {
      case dnnl::cpu_isa::avx512_core_amx: return "AMX";
      case dnnl::cpu_isa::avx512_core_bf16: return "AVX-512 BF16";
      case dnnl::cpu_isa::avx512_core_vnni: return "AVX-512 VNNI";
      case dnnl::cpu_isa::avx512_core: return "AVX-512";
      case dnnl::cpu_isa::avx2_vnni: return "AVX2 VNNI";
      case dnnl::cpu_isa::avx2: return "AVX2";
      case dnnl::cpu_isa::avx: return "AVX";
      case dnnl::cpu_isa::sse41: return "SSE4.1";
      default: return "generic";
    }
  }

#endif

  CpuStream stream_;
};

// Registered when the library loads, so the CPU is always there.
const bool kRegistered = [] {
  register_backend(std::make_unique<CpuBackend>());
  return true;
}();

}  // namespace
}  // namespace nimbus
