// Element types of tensors.
//
//   DType t = DType::kF32;
//   dtype_size(t);        // 4
//   dtype_name(t);        // "f32"
//   parse_dtype("bf16");  // DType::kBF16; an unknown name throws InvalidArgument
//   visit_dtype(t, [&]<typename T>() { ... T is float here ... });
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "nimbus/base/error.h"
#include "nimbus/base/half.h"

namespace nimbus {

enum class DType : uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64, kU8, kBool };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                       DType::kI32, DType::kI64, DType::kU8,  DType::kBool};
inline constexpr int kNumDTypes = 8;

constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kU8:
    case DType::kBool: return 1;
  }
  return 0;
}

constexpr bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 || dtype == DType::kBF16;
}
constexpr bool is_integral(DType dtype) { return dtype == DType::kI32 || dtype == DType::kI64 || dtype == DType::kU8; }

// "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool".
std::string_view dtype_name(DType dtype);
// Accepts our names and the common aliases ("float32", "float", "half", "bfloat16", "int64", ...).
DType parse_dtype(std::string_view name);

// The C++ type that stores one element of each dtype.
template <DType D>
struct dtype_traits;
template <>
struct dtype_traits<DType::kF32> {
  using type = float;
};
template <>
struct dtype_traits<DType::kF64> {
  using type = double;
};
template <>
struct dtype_traits<DType::kF16> {
  using type = Half;
};
template <>
struct dtype_traits<DType::kBF16> {
  using type = BFloat16;
};
template <>
struct dtype_traits<DType::kI32> {
  using type = int32_t;
};
template <>
struct dtype_traits<DType::kI64> {
  using type = int64_t;
};
template <>
struct dtype_traits<DType::kU8> {
  using type = uint8_t;
};
template <>
struct dtype_traits<DType::kBool> {
  using type = bool;
};

template <DType D>
using dtype_t = typename dtype_traits<D>::type;

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kF64;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::kF16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kU8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::kBool;
}

// Calls fn.template operator()<T>() with T the storage type of `dtype`.
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn.template operator()<float>();
    case DType::kF64: return fn.template operator()<double>();
    case DType::kF16: return fn.template operator()<Half>();
    case DType::kBF16: return fn.template operator()<BFloat16>();
    case DType::kI32: return fn.template operator()<int32_t>();
    case DType::kI64: return fn.template operator()<int64_t>();
    case DType::kU8: return fn.template operator()<uint8_t>();
    case DType::kBool: return fn.template operator()<bool>();
  }
  throw InternalError("visit_dtype: corrupt dtype value");
}

// Converts between element types through double (exact for every type here
// except i64 beyond 2^53, which no test or model relies on).
template <typename T>
inline double to_double(T value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(value));
  } else {
    return static_cast<double>(value);
  }
}
template <typename T>
inline T from_double(double value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    return value != 0.0;
  } else {
    return static_cast<T>(value);
  }
}

}  // namespace nimbus
