// Sets the global dtype policy for a test's lifetime and restores the previous one.
#pragma once

#include <string_view>

#include "nimbus/nn/dtype_policy.h"

namespace nimbus::testing {

class GlobalPolicyScope {
 public:
  explicit GlobalPolicyScope(std::string_view name) : previous_(nn::global_policy()) { nn::set_global_policy(name); }
  ~GlobalPolicyScope() { nn::set_global_policy(previous_); }
  GlobalPolicyScope(const GlobalPolicyScope&) = delete;
  GlobalPolicyScope& operator=(const GlobalPolicyScope&) = delete;

 private:
  nn::DTypePolicy previous_;
};

}  // namespace nimbus::testing
