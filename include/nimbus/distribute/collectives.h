// Collectives: the communication between replicas, over flat host buffers, behind
// one interface with an in-process implementation (threads; the reference every
// other implementation is tested against) and an MPI one (processes).
//
//   InProcessGroup group(2, {.timeout = std::chrono::seconds(10)});
//   // on replica r's thread:
//   Collectives& c = group.member(r);
//   c.all_reduce(gradients, ReduceOp::kMean);   // every rank ends with the mean, bit for bit the same
//   c.broadcast(std::as_writable_bytes(std::span(weights)), 0);
//   c.all_gather(mine, everyone);               // everyone = size() * mine.size(), in rank order
//   c.barrier();
//
// Every rank must call the same collectives in the same order with the same sizes
// (a mismatch is an InvalidArgument naming both calls). Every call has a deadline:
// when some rank does not arrive within the timeout, the call throws
// CollectiveTimeout naming the collective, the ranks that did not arrive, the
// timeout and what the caller was doing (set_context: "step 12"), and the group
// is aborted so that no other rank hangs on it either.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nimbus/base/error.h"

namespace nimbus::distribute {

// A rank did not arrive at a collective within its timeout (or the group was aborted).
class CollectiveTimeout : public Unavailable {
 public:
  using Unavailable::Unavailable;
};

enum class ReduceOp { kSum, kMean };

struct CollectiveOptions {
  // How long one collective waits for every rank (runtime.strategy.collective_timeout).
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // buffer <- the element-wise sum (or mean) of every rank's buffer, summed in rank order so
  // that every rank gets the same bits.
  virtual void all_reduce(std::span<float> buffer, ReduceOp op) = 0;
  // buffer <- root's buffer.
  virtual void broadcast(std::span<std::byte> buffer, int root) = 0;
  // receive[r * send.size() ..] <- rank r's send, for every rank r.
  virtual void all_gather(std::span<const float> send, std::span<float> receive) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;

  // What this rank is doing, named by timeout messages ("step 12").
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }

 private:
  std::string context_;
};

// The ranks of `size` threads of one process, meeting in shared memory.
class InProcessGroup {
 public:
  explicit InProcessGroup(int size, CollectiveOptions options = {});
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const;
  // Rank `rank`'s end of the group, to be used from one thread at a time.
  Collectives& member(int rank);
  // Fails every pending and later collective with `reason` (a replica failed: nobody waits on it).
  void abort(const std::string& reason);
  bool aborted() const;

 private:
  struct State;
  class Member;
  std::shared_ptr<State> state_;
  std::vector<std::unique_ptr<Member>> members_;
};

// "2s", "10min", "1500ms": how timeouts read in messages.
std::string format_timeout(std::chrono::milliseconds timeout);

}  // namespace nimbus::distribute
