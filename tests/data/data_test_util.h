// Helpers shared by the data tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "nimbus/data/dataset.h"

namespace nimbus::data::testing {

// Component `c` of each element as an int64 scalar.
inline std::vector<int64_t> scalars(const std::vector<Element>& elements, size_t c = 0) {
  std::vector<int64_t> out;
  for (const auto& e : elements) out.push_back(e.at(c).item<int64_t>());
  return out;
}

inline std::vector<int64_t> iota(int64_t n, int64_t start = 0) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(start + i);
  return out;
}

// A fresh temporary directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() / (std::string("nimbus_data_") + info->test_suite_name() + "_" +
                                                     info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

}  // namespace nimbus::data::testing
