// Errors: every failure Nimbus reports is a nimbus::Error with a kind, a
// message that names the offending thing (file, line, key, layer, shape) and,
// where one exists, a hint that says what to do.
//
//   throw InvalidArgument(fmt::format("matmul: inner dimensions differ: {} vs {}", a, b),
//                         "transpose one operand (transpose_b=true) or reshape it");
//
//   NIMBUS_ASSERT(offset <= size) << "offset " << offset << " past " << size;
//
// User and data errors use the subclasses below; broken invariants use
// NIMBUS_ASSERT, which throws InternalError with the expression, file and line
// (an exception, not an abort, so that a trainer can still save its state).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace nimbus {

enum class ErrorKind {
  kInvalidArgument,
  kOutOfMemory,
  kDataError,
  kNotFound,
  kUnavailable,
  kUnimplemented,
  kInternal,
};

std::string_view error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, std::string hint = {});

  ErrorKind kind() const { return kind_; }
  // The message without the hint.
  const std::string& message() const { return message_; }
  // What to do about it; empty when there is no concrete remedy.
  const std::string& hint() const { return hint_; }

 private:
  ErrorKind kind_;
  std::string message_;
  std::string hint_;
};

// Name and Kind are a class name and an enumerator, which cannot take parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define NIMBUS_DEFINE_ERROR(Name, Kind)                                  \
  class Name : public Error {                                            \
   public:                                                               \
    explicit Name(std::string message, std::string hint = {})            \
        : Error(ErrorKind::Kind, std::move(message), std::move(hint)) {} \
  }
// NOLINTEND(bugprone-macro-parentheses)

// Bad argument from the caller: wrong shape, dtype, axis, key or value.
NIMBUS_DEFINE_ERROR(InvalidArgument, kInvalidArgument);
// A device or host allocation cannot be served.
NIMBUS_DEFINE_ERROR(OutOfMemory, kOutOfMemory);
// A file or record is malformed (truncated, bad checksum, wrong magic).
NIMBUS_DEFINE_ERROR(DataError, kDataError);
// A file, key, op or device that does not exist.
NIMBUS_DEFINE_ERROR(NotFound, kNotFound);
// Something this machine or build lacks (no GPU driver, no CUDA backend).
NIMBUS_DEFINE_ERROR(Unavailable, kUnavailable);
// A valid request that Nimbus does not support (yet).
NIMBUS_DEFINE_ERROR(Unimplemented, kUnimplemented);
// A broken invariant: a bug in Nimbus, not in the caller's input.
NIMBUS_DEFINE_ERROR(InternalError, kInternal);

#undef NIMBUS_DEFINE_ERROR

namespace detail {
// Collects the streamed message of a failed assertion and throws it when the
// full expression ends.
class AssertionFailure {
 public:
  AssertionFailure(const char* expression, const char* file, int line);
  AssertionFailure(const AssertionFailure&) = delete;
  AssertionFailure& operator=(const AssertionFailure&) = delete;
  // Throws by design: the assertion fires when the streamed expression ends.
  ~AssertionFailure() noexcept(false);  // NOLINT(bugprone-exception-escape)

  template <typename T>
  AssertionFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace nimbus

#define NIMBUS_ASSERT(condition) \
  if (condition) {               \
  } else                         \
    ::nimbus::detail::AssertionFailure(#condition, __FILE__, __LINE__)
