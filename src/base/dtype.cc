#include "nimbus/base/dtype.h"

#include <fmt/format.h>

#include <string>

namespace nimbus {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"f32", DType::kF32},     {"float32", DType::kF32}, {"float", DType::kF32},     {"f64", DType::kF64},
      {"float64", DType::kF64}, {"double", DType::kF64},  {"f16", DType::kF16},       {"float16", DType::kF16},
      {"half", DType::kF16},    {"bf16", DType::kBF16},   {"bfloat16", DType::kBF16}, {"i32", DType::kI32},
      {"int32", DType::kI32},   {"i64", DType::kI64},     {"int64", DType::kI64},     {"u8", DType::kU8},
      {"uint8", DType::kU8},    {"bool", DType::kBool},
  };
  for (const Alias& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  throw InvalidArgument(fmt::format("unknown dtype '{}'", name), "use one of f32, f64, f16, bf16, i32, i64, u8, bool");
}

}  // namespace nimbus
