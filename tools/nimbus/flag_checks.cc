#include "flag_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <regex>

namespace nimbus::cli {
namespace {

// What a refused value gets: "'VALUE' is WHAT: give ALLOWED" (CLI11 puts "--flag: " in front).
std::string refusal(const std::string& value, const std::string& what, const std::string& allowed) {
  return fmt::format("'{}' {}: give {}", value, value.empty() ? "is empty" : what, allowed);
}

std::optional<int64_t> parse_whole_number(const std::string& text, bool& too_large) {
  const char* begin = text.data() + (text.starts_with('+') ? 1 : 0);
  const char* end = text.data() + text.size();
  int64_t value = 0;
  const auto [stop, error] = std::from_chars(begin, end, value);
  too_large = error == std::errc::result_out_of_range && stop == end;
  if (error != std::errc() || stop != end || begin == end) return std::nullopt;
  return value;
}

std::optional<double> parse_finite_number(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* stop = nullptr;
  const double value = std::strtod(text.c_str(), &stop);
  if (stop != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// 86400, 1000000, 1e15: short, without a 300-digit expansion or a "+" in the exponent.
std::string plain(double value) {
  std::string text = fmt::format("{:.15g}", value);
  if (const size_t plus = text.find("e+"); plus != std::string::npos) text.erase(plus + 1, 1);
  return text;
}

CLI::Validator real_number(double low, bool low_allowed, double high) {
  const std::string allowed =
      fmt::format("a number {} {} and at most {}", low_allowed ? "from" : "above", plain(low), plain(high));
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::optional<double> value = parse_finite_number(text);
        if (!value) return refusal(text, "is not a finite number", allowed);
        if (*value > high || *value < low || (*value == low && !low_allowed)) {
          return refusal(text, "is out of range", allowed);
        }
        return {};
      },
      fmt::format("{}{}..{}", low_allowed ? "" : ">", plain(low), plain(high)));
}

}  // namespace

CLI::Validator whole_number(int64_t low, int64_t high) {
  const std::string allowed = fmt::format("a whole number from {} to {}", low, high);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        bool too_large = false;
        const std::optional<int64_t> value = parse_whole_number(text, too_large);
        if (too_large) return refusal(text, "is out of range", allowed);
        if (!value) return refusal(text, "is not a whole number", allowed);
        if (*value < low || *value > high) return refusal(text, "is out of range", allowed);
        return {};
      },
      fmt::format("{}..{}", low, high));
}

CLI::Validator positive_real(double high) { return real_number(0, false, high); }

CLI::Validator non_negative_real(double high) { return real_number(0, true, high); }

CLI::Validator port_number(bool zero_picks_a_free_port) {
  CLI::Validator check = whole_number(zero_picks_a_free_port ? 0 : 1, 65535);
  if (!zero_picks_a_free_port) return check;
  return CLI::Validator(
      [check](std::string& text) -> std::string {
        const std::string refused = check(text);
        return refused.empty() ? refused : refused + " (0 picks a free port)";
      },
      "0..65535");
}

CLI::Validator kubernetes_quantity() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        static const std::regex form(R"(([0-9]+(\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?)");
        std::smatch match;
        if (!std::regex_match(text, match, form) || std::stod(match[1]) <= 0) {
          return refusal(text, "is not a Kubernetes quantity",
                         "a size above 0 with a unit, e.g. 100Gi or 500G (Ki, Mi, Gi, Ti: powers of 1024; k, M, G, "
                         "T: powers of 1000)");
        }
        return {};
      },
      "QUANTITY");
}

CLI::Validator kubernetes_subdomain() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        static const std::regex form(R"([a-z0-9]([-a-z0-9.]*[a-z0-9])?)");
        if (text.size() > 253 || !std::regex_match(text, form)) {
          return refusal(text, "is not a Kubernetes name",
                         "at most 253 lower-case letters, digits, '-' and '.', starting and ending with a letter or "
                         "digit");
        }
        return {};
      },
      "NAME");
}

CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string { return text.empty() ? refusal(text, "", what) : std::string(); },
      "TEXT");
}

CLI::Validator single_word() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool spaced = std::ranges::any_of(text, [](char c) {
          return std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)) ||
                 c == '"' || c == '\'';
        });
        if (text.empty() || spaced) return refusal(text, "is not one word", "a value without spaces or quotes");
        return {};
      },
      "WORD");
}

CLI::Validator device_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        static const std::regex form(R"(auto|cpu|cuda(:(0|[1-9][0-9]{0,3}))?)");
        if (!std::regex_match(text, form)) {
          return refusal(text, "is not a device",
                         "auto (a GPU when there is one, else the CPU), cpu, cuda (the first GPU) or cuda:N (GPU N, "
                         "from 0)");
        }
        return {};
      },
      "auto|cpu|cuda|cuda:N");
}

}  // namespace nimbus::cli
