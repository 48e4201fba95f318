// Streams order work on a device. Kernels are enqueued on a stream and run in
// order; the host waits only at explicit synchronization points (reading a
// value, copying to the host). On the CPU a stream runs work at once, in the
// calling thread; on a GPU it is the device's queue.
//
//   Stream& s = backend(DeviceType::kCPU).default_stream(0);
//   Event done = s.record();
//   other_stream.wait(done);   // orders other_stream after s without blocking the host
//   s.synchronize();           // host waits for everything enqueued so far
#pragma once

#include <memory>

#include "nimbus/device/device.h"

namespace nimbus {

// A point in a stream's sequence of work.
class Event {
 public:
  virtual ~Event() = default;
  // True once all work before the event has finished.
  virtual bool query() const = 0;
  virtual void synchronize() const = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual void synchronize() = 0;
  virtual std::shared_ptr<Event> record() = 0;
  // Work enqueued on this stream after the call starts only after `event`.
  virtual void wait(const Event& event) = 0;
};

}  // namespace nimbus
