#include "nimbus/autodiff/variable.h"

#include <mutex>
#include <unordered_map>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/base/error.h"
#include "nimbus/ops/assign.h"
#include "nimbus/ops/elementwise.h"

namespace nimbus {

namespace {
// Live variables by their tensor's id.
struct VariableRegistry {
  std::mutex mutex;
  std::unordered_map<uint64_t, VariableInfo> variables;
};
VariableRegistry& variable_registry() {
  static VariableRegistry registry;
  return registry;
}
Tensor& update_condition() {
  thread_local Tensor condition;
  return condition;
}
}  // namespace

ConditionalUpdateScope::ConditionalUpdateScope(Tensor condition) : previous_(update_condition()) {
  NIMBUS_ASSERT(condition.defined() && condition.dtype() == DType::kBool && condition.rank() == 0)
      << "ConditionalUpdateScope needs a bool scalar";
  update_condition() = std::move(condition);
}
ConditionalUpdateScope::~ConditionalUpdateScope() { update_condition() = previous_; }
const Tensor& ConditionalUpdateScope::current() { return update_condition(); }

Variable::Variable(const Tensor& initial_value, std::string name, bool trainable) {
  if (!initial_value.defined()) throw InvalidArgument("Variable '" + name + "': the initial value is undefined");
  if (initial_value.is_symbolic()) {
    throw InvalidArgument("Variable '" + name + "' created inside a traced function",
                          "create variables once, outside the function, and use them inside");
  }
  state_ = std::make_shared<State>();
  // A private copy: the caller's tensor must not change when the variable does.
  state_->value = initial_value.clone();
  state_->name = std::move(name);
  state_->trainable = trainable;
  VariableRegistry& registry = variable_registry();
  std::lock_guard lock(registry.mutex);
  registry.variables[state_->value.id()] = {state_->name, trainable};
}

Variable::State::~State() {
  if (!value.defined()) return;
  VariableRegistry& registry = variable_registry();
  std::lock_guard lock(registry.mutex);
  registry.variables.erase(value.id());
}

std::optional<VariableInfo> variable_info_of(const Tensor& tensor) {
  VariableRegistry& registry = variable_registry();
  std::lock_guard lock(registry.mutex);
  auto it = registry.variables.find(tensor.id());
  if (it == registry.variables.end()) return std::nullopt;
  return it->second;
}

const Variable::State& Variable::state() const {
  if (state_ == nullptr) throw InvalidArgument("use of an undefined Variable");
  return *state_;
}

const Tensor& Variable::value() const {
  const State& s = state();
  if (s.trainable) GradientTape::notify_variable_read(*this, s.value);
  return s.value;
}

void Variable::assign(const Tensor& new_value) {
  const State& s = state();
  if (new_value.shape() != s.value.shape() || new_value.dtype() != s.value.dtype()) {
    throw InvalidArgument("Variable '" + s.name + "': assign of a " + std::string(dtype_name(new_value.dtype())) + " " +
                          new_value.shape().to_string() + " value to a " + std::string(dtype_name(s.value.dtype())) +
                          " " + s.value.shape().to_string() + " variable");
  }
  const bool elsewhere = !new_value.is_symbolic() && new_value.device() != s.value.device();
  const Tensor value = elsewhere ? new_value.to(s.value.device()) : new_value;
  const Tensor& condition = update_condition();
  nimbus::assign(s.value, condition.defined() ? where(condition, value, s.value) : value);
}

void Variable::place_on(Device device) {
  (void)state();  // an undefined Variable throws
  State& s = *state_;
  if (s.value.device() == device) return;
  Tensor placed = s.value.to(device);
  VariableRegistry& registry = variable_registry();
  std::lock_guard lock(registry.mutex);
  registry.variables.erase(s.value.id());
  registry.variables[placed.id()] = {s.name, s.trainable};
  s.value = std::move(placed);
}

void Variable::assign_add(const Tensor& delta) { assign(add(state().value, delta)); }
void Variable::assign_sub(const Tensor& delta) { assign(sub(state().value, delta)); }

const std::string& Variable::name() const { return state().name; }
bool Variable::trainable() const { return state().trainable; }

}  // namespace nimbus
