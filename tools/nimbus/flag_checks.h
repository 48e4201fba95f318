// The checks of nimbus's command-line flags (CLI11 validators), in one place so that every subcommand
// refuses a bad value the same way: the error names the flag (CLI11 prefixes it), the value, and what
// to give instead in plain words, e.g.
//
//   --max-nodes: '536870912' is out of range: give a whole number from 1 to 1024
//
// Each validator parses the text itself, so a non-number, an empty value, NaN or a number too large
// for the flag's type get the same kind of message, never a conversion error or a 300-digit bound.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace nimbus::cli {

// A whole number from `low` to `high` (decimal digits, an optional leading '-').
CLI::Validator whole_number(int64_t low, int64_t high);

// A finite number above 0 (positive_real) or from 0 (non_negative_real) up to `high`.
CLI::Validator positive_real(double high);
CLI::Validator non_negative_real(double high);

// A TCP port: 1 to 65535, or also 0 where 0 means "pick a free one".
CLI::Validator port_number(bool zero_picks_a_free_port);

// A Kubernetes storage quantity: a positive number with an optional suffix (100Gi, 500G, 1.5Ti).
CLI::Validator kubernetes_quantity();

// A DNS-1123 subdomain, as Kubernetes object names such as storage classes are written.
CLI::Validator kubernetes_subdomain();

// A path or address that is not empty: an empty value would otherwise fall back to the flag's default
// (or to no value at all) without a word.
CLI::Validator non_empty(const std::string& what);

// A value written into a manifest or command line as one word: not empty, no white space or quotes.
CLI::Validator single_word();

// A device to run on: auto, cpu, cuda or cuda:N (the form only; whether the machine has it is the
// command's check, device_choice.h).
CLI::Validator device_name();

}  // namespace nimbus::cli
