#include "nimbus/base/error.h"

#include <exception>

namespace nimbus {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kOutOfMemory: return "out of memory";
    case ErrorKind::kDataError: return "data error";
    case ErrorKind::kNotFound: return "not found";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kUnimplemented: return "unimplemented";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

namespace {
std::string compose(const std::string& message, const std::string& hint) {
  return hint.empty() ? message : message + "\n  hint: " + hint;
}
}  // namespace

Error::Error(ErrorKind kind, std::string message, std::string hint)
    : std::runtime_error(compose(message, hint)), kind_(kind), message_(std::move(message)), hint_(std::move(hint)) {}

namespace detail {

AssertionFailure::AssertionFailure(const char* expression, const char* file, int line) {
  stream_ << "assertion failed: " << expression << " at " << file << ":" << line;
  stream_ << ": ";
}

AssertionFailure::~AssertionFailure() noexcept(false) {  // NOLINT(bugprone-exception-escape)
  // Never throw while another exception unwinds the stack: that would terminate.
  if (std::uncaught_exceptions() == 0) throw InternalError(stream_.str());
}

}  // namespace detail
}  // namespace nimbus
