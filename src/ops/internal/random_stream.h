// The attributes every random op (OpKind::kRandom) carries: the generator it
// draws from, that generator's seed, and the index of its first number. A
// random op consumes one number per element of its first output, so graph
// mode can claim fresh numbers (a new offset) each time a traced graph runs.
// Internal.
#pragma once

#include "nimbus/base/rng.h"
#include "nimbus/ops/attrs.h"
#include "nimbus/ops/dispatch.h"

namespace nimbus::internal {

// Claims `count` numbers from `generator` (the default one when null) and records where they are.
// While a function is traced nothing is claimed: the graph's executor claims the numbers each time
// it runs, so a traced function draws exactly what eager code would (and tracing again, as a resumed
// run does, does not shift the stream).
inline void claim_random_stream(Attrs& attrs, Generator* generator, int64_t count) {
  Generator& gen = generator != nullptr ? *generator : default_generator();
  const bool tracing = current_op_interceptor() != nullptr;
  attrs.set("generator", static_cast<int64_t>(gen.id()))
      .set("seed", static_cast<int64_t>(gen.seed()))
      .set("offset", static_cast<int64_t>(tracing ? gen.offset() : gen.reserve(static_cast<uint64_t>(count))));
}

}  // namespace nimbus::internal
