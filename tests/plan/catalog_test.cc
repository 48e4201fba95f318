// The catalogs in data/catalog: the GPUs the issue names, name matching, support marks, sources and
// dates, user overrides, and errors that name the file, line and field.
#include "nimbus/plan/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "tests/plan/shipped_catalog.h"

namespace nimbus::plan {
namespace {

using ::testing::HasSubstr;

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(Catalog, HasEveryNamedGpuWithVariantsNamedAfterIt) {
  for (const char* name :
       {"T4", "L4", "A10G", "V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100", "H200", "L40S"}) {
    const GpuSpec& gpu = shipped().gpu(name);
    EXPECT_GT(gpu.memory_gb, 0) << name;
    EXPECT_GT(gpu.memory_bandwidth_gbps, 0) << name;
    EXPECT_GT(gpu.tflops.fp32, 0) << name;
    EXPECT_FALSE(gpu.source.empty()) << name;
    EXPECT_FALSE(gpu.as_of.empty()) << name;
  }
  // Variants are entries of their own whose names start with the short name's model.
  EXPECT_EQ(shipped().gpu("A100-80GB").name, "A100-SXM4-80GB");
  EXPECT_EQ(shipped().gpu("A100-PCIe-80GB").name, "A100-PCIe-80GB");
  EXPECT_EQ(shipped().gpu("H100").name, "H100-SXM5-80GB");
  EXPECT_EQ(shipped().gpu("H100-PCIe-80GB").memory_bandwidth_gbps, 2000);
  EXPECT_EQ(shipped().gpu("V100-32GB").name, "V100-SXM2-32GB");
}

TEST(Catalog, NamesMatchCaseInsensitively) {
  EXPECT_EQ(&shipped().gpu("a100-80gb"), &shipped().gpu("A100-80GB"));
  EXPECT_EQ(&shipped().gpu("t4"), &shipped().gpu("T4"));
  EXPECT_EQ(&shipped().gpu("h100-sxm5-80gb"), &shipped().gpu("H100"));
}

TEST(Catalog, VoltaIsKeptButMarkedUnsupported) {
  EXPECT_FALSE(shipped().gpu("V100-16GB").supported());
  EXPECT_FALSE(shipped().gpu("V100-PCIe-32GB").supported());
  EXPECT_TRUE(shipped().gpu("T4").supported());
  EXPECT_TRUE(shipped().gpu("H200").supported());
}

TEST(Catalog, UnknownGpuListsTheKnownOnes) {
  try {
    shipped().gpu("RTX-9090");
    FAIL() << "no error";
  } catch (const NotFound& error) {
    EXPECT_THAT(error.message(), HasSubstr("RTX-9090"));
    EXPECT_THAT(error.message(), HasSubstr("A100-80GB"));
    EXPECT_THAT(error.message(), HasSubstr("T4"));
  }
}

TEST(Catalog, EveryInstanceHasAPriceSourceAndDate) {
  ASSERT_FALSE(shipped().instances.empty());
  for (const char* cloud : {"aws", "gcp", "azure"}) {
    EXPECT_TRUE(std::ranges::any_of(shipped().instances, [&](const InstanceSpec& i) { return i.cloud == cloud; }))
        << cloud;
  }
  for (const InstanceSpec& instance : shipped().instances) {
    EXPECT_GT(instance.on_demand_usd_per_hour, 0) << instance.name;
    EXPECT_LT(shipped().spot_usd_per_hour(instance), instance.on_demand_usd_per_hour) << instance.name;
    EXPECT_FALSE(instance.source.empty()) << instance.name;
    EXPECT_FALSE(instance.as_of.empty()) << instance.name;
    EXPECT_GT(instance.vcpus, 0) << instance.name;
  }
}

TEST(Catalog, UserFileOverridesAPriceAndAddsAnInstance) {
  const std::string mine = write_temp("nimbus_private_prices.yaml", R"(instances:
  - {cloud: aws, name: g4dn.xlarge, gpu: T4, gpu_count: 1, vcpus: 4, ram_gb: 16, region: us-east-1,
     on_demand_usd_per_hour: 0.30, network_gbps: 25, source: "our contract", as_of: 2026-11-01}
  - {cloud: aws, name: g6.xlarge, gpu: L4, gpu_count: 1, vcpus: 4, ram_gb: 16, region: us-east-1,
     on_demand_usd_per_hour: 0.80, network_gbps: 10, source: "our contract", as_of: 2026-11-01}
)");
  std::vector<std::string> files = default_catalog_files();
  files.push_back(mine);
  const Catalog catalog = load_catalog(files);
  EXPECT_EQ(catalog.instances.size(), shipped().instances.size() + 1);
  const auto g4dn =
      std::ranges::find_if(catalog.instances, [](const InstanceSpec& i) { return i.name == "g4dn.xlarge"; });
  ASSERT_NE(g4dn, catalog.instances.end());
  EXPECT_DOUBLE_EQ(g4dn->on_demand_usd_per_hour, 0.30);
  EXPECT_EQ(g4dn->source, "our contract");
  // No observed spot price in the override: the cloud's typical discount applies.
  EXPECT_NEAR(catalog.spot_usd_per_hour(*g4dn), 0.30 * (1 - catalog.cloud("aws").typical_spot_discount), 1e-12);
}

TEST(Catalog, MissingFieldNamesFileLineAndField) {
  const std::string bad = write_temp("nimbus_bad_catalog.yaml", R"(gpus:
  - name: T4
    product_label: Tesla-T4
    arch: turing
    compute_capability: 7.5
    memory_gb: 16
    memory_bandwidth_gbps: 320
    tflops: {fp32: 8.1}
    pcie_gbps: 16
    tdp_w: 70
    source: x
    as_of: 2026-11-30
  - name: X1
    arch: made-up
    compute_capability: 9.0
)");
  try {
    load_catalog({bad});
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr(bad + ":13:"));
    EXPECT_THAT(error.message(), HasSubstr("'product_label'"));
  }
}

TEST(Catalog, WrongTypeNamesTheField) {
  const std::string bad = write_temp("nimbus_bad_type.yaml", R"(clouds:
  - {name: aws, typical_spot_discount: lots, preemption_notice_seconds: 120, source: x, as_of: y}
)");
  try {
    load_catalog({bad});
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr(bad + ":2:"));
    EXPECT_THAT(error.message(), HasSubstr("'typical_spot_discount'"));
    EXPECT_THAT(error.message(), HasSubstr("a number"));
  }
}

// What load_catalog throws for `text`, or "no error".
std::string catalog_refusal(const std::string& file, const std::string& text) {
  try {
    load_catalog({write_temp(file, text)});
  } catch (const DataError& error) {
    return error.message();
  }
  return "no error";
}

TEST(Catalog, AFileThatIsNotAMappingOfSectionsIsRefusedInItsOwnWords) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/";
  // yaml-cpp's "operator[] call on a scalar" leaked for a file of plain text.
  EXPECT_EQ(catalog_refusal("nimbus_scalar.yaml", "just text\n"),
            dir + "nimbus_scalar.yaml:1: the catalog file is not a mapping of sections");
  EXPECT_THAT(catalog_refusal("nimbus_typo.yaml", "clouds: []\ngpu:\n  - name: X\n"),
              HasSubstr("nimbus_typo.yaml:2: unknown section 'gpu'"));
  EXPECT_THAT(catalog_refusal("nimbus_syntax.yaml", "gpus: [\n"), HasSubstr("nimbus_syntax.yaml:2:1: not valid YAML"));
  EXPECT_EQ(catalog_refusal("nimbus_empty.yaml", ""), "no error");
}

TEST(Catalog, CountsAndFiguresOutOfRangeNameTheField) {
  const std::string instance = R"(instances:
  - {cloud: aws, name: x1.big, gpu: T4, gpu_count: GPUS, vcpus: 4, ram_gb: 16, region: r,
     on_demand_usd_per_hour: PRICE, network_gbps: 1, source: s, as_of: d}
)";
  const auto with = [&](const std::string& gpus, const std::string& price) {
    std::string text = instance;
    text.replace(text.find("GPUS"), 4, gpus);
    text.replace(text.find("PRICE"), 5, price);
    return text;
  };
  // 0 GPUs divided the instance's cores by zero.
  EXPECT_THAT(catalog_refusal("nimbus_zero_gpus.yaml", with("0", "1")),
              HasSubstr("nimbus_zero_gpus.yaml:2: field 'gpu_count' of a instances entry is 0: it should be 1 to 64"));
  EXPECT_THAT(catalog_refusal("nimbus_many_gpus.yaml", with("100000", "1")), HasSubstr("'gpu_count'"));
  EXPECT_THAT(catalog_refusal("nimbus_nan_price.yaml", with("1", ".nan")),
              HasSubstr("field 'on_demand_usd_per_hour' of a instances entry is .nan"));
  EXPECT_THAT(catalog_refusal("nimbus_negative_price.yaml", with("1", "-2")), HasSubstr("is -2"));
}

TEST(Catalog, InstanceOfAnUnknownGpuIsRefused) {
  std::vector<std::string> files = default_catalog_files();
  files.push_back(write_temp("nimbus_unknown_gpu.yaml", R"(instances:
  - {cloud: aws, name: x1.big, gpu: Z9, gpu_count: 1, vcpus: 4, ram_gb: 16, region: r,
     on_demand_usd_per_hour: 1, network_gbps: 1, source: s, as_of: d}
)"));
  try {
    load_catalog(files);
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr("x1.big"));
    EXPECT_THAT(error.message(), HasSubstr("unknown GPU 'Z9'"));
  }
}

}  // namespace
}  // namespace nimbus::plan
