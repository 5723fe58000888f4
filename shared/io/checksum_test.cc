#include "shared/io/checksum.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace flotilla::io {
namespace {

TEST(Checksum64Test, EmptyInputMatchesXxh3Reference) {
  // Published XXH3_64bits value of the empty input (seed 0).
  EXPECT_EQ(Checksum64(nullptr, 0), 0x2D06800538D394C2ull);
  EXPECT_EQ(Checksum64("", 0), 0x2D06800538D394C2ull);
}

TEST(Checksum64Test, SensitiveToEveryByte) {
  std::vector<uint8_t> data(100000, 0x5A);
  const uint64_t base = Checksum64(data.data(), data.size());
  data[77777] ^= 1;
  EXPECT_NE(Checksum64(data.data(), data.size()), base);
}

TEST(Checksum64Test, StreamingEqualsOneShot) {
  std::vector<uint8_t> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = i * 31 + (i >> 9);
  Checksum64Stream s;
  size_t off = 0;
  for (size_t step : {1, 7, 4096, 100000, 333}) {
    s.Update(data.data() + off, step);
    off += step;
  }
  s.Update(data.data() + off, data.size() - off);
  EXPECT_EQ(s.Digest(), Checksum64(data.data(), data.size()));
  Checksum64Stream empty;
  EXPECT_EQ(empty.Digest(), 0x2D06800538D394C2ull);
}

TEST(ChecksumHexTest, FormatsAndParses) {
  EXPECT_EQ(ChecksumHex(0x2D06800538D394C2ull), "2d06800538d394c2");
  EXPECT_EQ(ChecksumHex(1), "0000000000000001");
  EXPECT_EQ(*ParseChecksumHex("2D06800538D394C2"), 0x2D06800538D394C2ull);
  EXPECT_EQ(*ParseChecksumHex("0x0000000000000001"), 1u);
  EXPECT_FALSE(ParseChecksumHex("").ok());
  EXPECT_FALSE(ParseChecksumHex("xyz").ok());
  EXPECT_FALSE(ParseChecksumHex("12345678901234567").ok());
}

}  // namespace
}  // namespace flotilla::io
