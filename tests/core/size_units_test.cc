// Sizes with units (configs and flags) and their human-readable form.
#include "nimbus/base/size_units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/base/error.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ParseSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("10B"), 10u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1KiB"), 1024u);
  EXPECT_EQ(parse_size("3 MiB"), 3u * 1024 * 1024);
  EXPECT_EQ(parse_size("12GiB"), 12ull * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_size("2TiB"), 2ull << 40);
  EXPECT_EQ(parse_size("1KB"), 1000u);
  EXPECT_EQ(parse_size("1kB"), 1000u);
  EXPECT_EQ(parse_size("1.5 GB"), 1'500'000'000u);
  EXPECT_EQ(parse_size("0.5KiB"), 512u);
  EXPECT_EQ(parse_size("7TB"), 7'000'000'000'000u);
  EXPECT_EQ(parse_size("  8 MB  "), 8'000'000u) << "surrounding spaces are ignored";
}

TEST(ParseSize, MalformedTextNamesItAndListsTheUnits) {
  for (const char* bad : {"", "GiB", "12 XB", "-1", "1.5", "1e3", "1..2KiB", "12 gib", "12GiB extra", "0x10"}) {
    try {
      const uint64_t parsed = parse_size(bad);
      ADD_FAILURE() << "'" << bad << "' parsed as " << parsed;
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.message(), HasSubstr(std::string("'") + bad + "'"));
      EXPECT_THAT(e.hint(), HasSubstr("GiB"));
    }
  }
}

TEST(ParseSize, SizesPast64BitsAreAnErrorNotGarbage) {
  EXPECT_EQ(parse_size("9000000TB"), 9'000'000'000'000'000'000u);
  EXPECT_EQ(parse_size("16000000TB"), 16'000'000'000'000'000'000u) << "above 2^63, below 2^64";
  for (const char* huge : {"20000000TiB", "18446744073709551616", "99999999999999999999GB"}) {
    try {
      const uint64_t parsed = parse_size(huge);
      ADD_FAILURE() << "'" << huge << "' parsed as " << parsed;
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.message(), AllOf(HasSubstr(std::string("'") + huge + "'"), HasSubstr("too large")));
    }
  }
}

TEST(FormatBytes, PowersOf1024WithOneDecimal) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3ull << 20), "3.0 MiB");
  EXPECT_EQ(format_bytes(19'541'484'749ull), "18.2 GiB");
  EXPECT_EQ(format_bytes(5ull << 40), "5.0 TiB");
  EXPECT_EQ(format_bytes(3ull << 50), "3.0 PiB");
}

TEST(FormatBytes, RoundingUpMovesToTheNextUnit) {
  // 1048575 bytes is 1023.999 KiB: "1024.0 KiB" would be a unit too small.
  EXPECT_EQ(format_bytes((1ull << 20) - 1), "1.0 MiB");
  EXPECT_EQ(format_bytes((1ull << 30) - 1), "1.0 GiB");
  EXPECT_EQ(format_bytes(1023ull * 1024 + 900), "1023.9 KiB") << "below 1023.95 KiB it stays";
  EXPECT_EQ(format_bytes(~0ull), "16384.0 PiB") << "the largest unit has no next one";
}

TEST(FormatBytes, InvertsParseSizeToOneDecimal) {
  for (const char* text : {"1.5KiB", "12GiB", "640MiB", "2.5TiB"}) {
    EXPECT_EQ(parse_size(format_bytes(parse_size(text))), parse_size(text)) << text;
  }
}

}  // namespace
}  // namespace nimbus
