#include "strata/io/digest.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(Digest, Sha256HexMatchesTheStandardsVectors) {
  // FIPS 180-2, appendix B.1 and the empty message.
  EXPECT_EQ(io::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(io::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(io::sha256_hex(std::string_view("a\0b", 3)).size(), 64u);  // bytes, not a C string
  EXPECT_NE(io::sha256_hex(std::string_view("a\0b", 3)), io::sha256_hex("a"));
}

}  // namespace
}  // namespace strata
