// Sets current_replica() (strategy.h) for a scope's duration. Internal to the library.
#pragma once

#include "nimbus/distribute/strategy.h"

namespace nimbus::distribute {

class ReplicaScope {
 public:
  explicit ReplicaScope(const ReplicaContext* context);
  ~ReplicaScope();
  ReplicaScope(const ReplicaScope&) = delete;
  ReplicaScope& operator=(const ReplicaScope&) = delete;

 private:
  const ReplicaContext* previous_;
};

}  // namespace nimbus::distribute
