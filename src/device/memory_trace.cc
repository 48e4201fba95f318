#include "nimbus/device/memory_trace.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "nimbus/base/error.h"

namespace nimbus {

void MemoryTrace::add(const std::vector<MemoryEvent>& recorded, const std::string& phase) {
  for (const MemoryEvent& e : recorded) {
    if (e.kind == MemoryEvent::Kind::kAllocate) {
      const auto id = static_cast<uint32_t>(bytes.size());
      live_[e.address] = id;
      bytes.push_back(e.bytes);
      events.push_back({.allocate = true, .id = id, .bytes = e.bytes, .tag = e.tag});
    } else if (const auto it = live_.find(e.address); it != live_.end()) {
      events.push_back({.allocate = false, .id = it->second});
      live_.erase(it);
    }
  }
  phases.push_back({phase, events.size()});
}

MemoryTrace read_memory_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw NotFound(fmt::format("cannot read the memory trace {}", path));
  MemoryTrace trace;
  std::vector<bool> live;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    auto bad = [&](const std::string& why) {
      return DataError(fmt::format("{}:{}: {}: '{}'", path, number, why, line),
                       "lines are 'a <id> <bytes> <tag>', 'f <id>' or '# ...' (include/nimbus/device/memory_trace.h)");
    };
    if (line.empty()) continue;
    if (line[0] == '#') {
      constexpr std::string_view kDone = " done";
      if (line.size() > 2 + kDone.size() && line.ends_with(kDone)) {
        trace.phases.push_back({line.substr(2, line.size() - 2 - kDone.size()), trace.events.size()});
      }
      continue;
    }
    std::istringstream fields(line);
    char kind = 0;
    MemoryTraceEvent event;
    int tag = 0;
    fields >> kind >> event.id;
    if (kind == 'a') {
      fields >> event.bytes >> tag;
      if (!fields || event.id != trace.bytes.size()) {
        throw bad("expected allocation " + std::to_string(trace.bytes.size()));
      }
      if (tag < 0 || tag >= static_cast<int>(kNumMemoryTags)) throw bad("no such memory tag");
      event.allocate = true;
      event.tag = static_cast<MemoryTag>(tag);
      trace.bytes.push_back(event.bytes);
      live.push_back(true);
    } else if (kind == 'f') {
      if (!fields || event.id >= live.size() || !live[event.id]) throw bad("release of a block that is not live");
      live[event.id] = false;
    } else {
      throw bad("not an event");
    }
    trace.events.push_back(event);
  }
  return trace;
}

void write_memory_trace(const MemoryTrace& trace, const std::string& path, const std::string& title) {
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!out) throw Unavailable(fmt::format("cannot write the memory trace {}", path));
  fmt::print(out.get(), "# {}\n", title);
  size_t event = 0;
  for (const MemoryTrace::Phase& phase : trace.phases) {
    for (; event < phase.end; ++event) {
      const MemoryTraceEvent& e = trace.events[event];
      if (e.allocate) {
        fmt::print(out.get(), "a {} {} {}\n", e.id, e.bytes, static_cast<int>(e.tag));
      } else {
        fmt::print(out.get(), "f {}\n", e.id);
      }
    }
    fmt::print(out.get(), "# {} done\n", phase.name);
  }
  for (; event < trace.events.size(); ++event) {
    const MemoryTraceEvent& e = trace.events[event];
    if (e.allocate) {
      fmt::print(out.get(), "a {} {} {}\n", e.id, e.bytes, static_cast<int>(e.tag));
    } else {
      fmt::print(out.get(), "f {}\n", e.id);
    }
  }
}

}  // namespace nimbus
