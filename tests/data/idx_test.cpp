#include "strata/data/idx.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "data/idx_files.h"
#include "strata/core/error.h"

namespace strata {
namespace {

using testing::Bytes;
using testing::gzip;
using testing::idx_bytes;
using testing::TempDir;
using testing::write_file;

// The message of the IOError that reading `path` throws ("" when none).
std::string read_error(const std::filesystem::path& path) {
  try {
    data::read_idx(path);
  } catch (const IOError& e) {
    return e.what();
  }
  return "";
}

Bytes iota_bytes(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(i * 7 % 256);
  return b;
}

TEST(Idx, ReadsAPlainFileWithItsShapeAndValues) {
  TempDir dir;
  const Bytes values = iota_bytes(3 * 2 * 4);
  write_file(dir / "x-idx3-ubyte", idx_bytes({3, 2, 4}, values));
  const Tensor t = data::read_idx(dir / "x-idx3-ubyte");
  EXPECT_EQ(t.dtype(), DType::U8);
  EXPECT_EQ(t.device(), kCPU);
  EXPECT_EQ(t.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(t.to_vector<uint8_t>(), (std::vector<uint8_t>(values.begin(), values.end())));
}

TEST(Idx, ReadsAGzipFile) {
  TempDir dir;
  // Larger than one stored deflate block (64 KiB), so the reader loops.
  const Bytes values = iota_bytes(300 * 250);
  write_file(dir / "y.gz", gzip(idx_bytes({300, 250}, values)));
  const Tensor t = data::read_idx(dir / "y.gz");
  EXPECT_EQ(t.shape(), (Shape{300, 250}));
  EXPECT_EQ(t.to_vector<uint8_t>(), (std::vector<uint8_t>(values.begin(), values.end())));
}

TEST(Idx, DataSpanningSeveralReadChunksArrivesWhole) {
  TempDir dir;
  // 4.5 MiB: read in chunks of 1, 1, 2 and 0.5 MiB, stitched into one tensor (plain and gzip'd).
  const std::size_t n = (std::size_t{9} << 20) / 2;
  const Bytes values = iota_bytes(n);
  write_file(dir / "big", idx_bytes({static_cast<uint32_t>(n / 512), 512}, values));
  write_file(dir / "big.gz", gzip(idx_bytes({static_cast<uint32_t>(n / 512), 512}, values)));
  for (const char* name : {"big", "big.gz"}) {
    const Tensor t = data::read_idx(dir / name);
    EXPECT_EQ(t.shape(), (Shape{static_cast<int64_t>(n / 512), 512})) << name;
    EXPECT_TRUE(t.to_vector<uint8_t>() == std::vector<uint8_t>(values.begin(), values.end())) << name;
  }
}

TEST(Idx, ZeroSizedDimensionGivesAnEmptyTensor) {
  TempDir dir;
  write_file(dir / "e", idx_bytes({0, 28, 28}, {}));
  EXPECT_EQ(data::read_idx(dir / "e").shape(), (Shape{0, 28, 28}));
}

TEST(Idx, MissingFileNamesThePath) {
  TempDir dir;
  const std::string message = read_error(dir / "nope.gz");
  EXPECT_NE(message.find("nope.gz"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
}

TEST(Idx, WrongMagicNumberIsAnIOError) {
  TempDir dir;
  write_file(dir / "zip", {'P', 'K', 3, 4, 0, 0, 0, 0});
  const std::string message = read_error(dir / "zip");
  EXPECT_NE(message.find("not an IDX file"), std::string::npos) << message;
  EXPECT_NE(message.find("0x50 0x4B"), std::string::npos) << message;
  EXPECT_NE(message.find("zip"), std::string::npos) << message;
}

TEST(Idx, NonByteElementTypeIsAnIOErrorNamingTheType) {
  TempDir dir;
  write_file(dir / "f", idx_bytes({2}, Bytes(8), 0x0D));
  const std::string message = read_error(dir / "f");
  EXPECT_NE(message.find("0x0D (float)"), std::string::npos) << message;
  EXPECT_NE(message.find("unsigned byte (0x08)"), std::string::npos) << message;
}

TEST(Idx, TooManyOrZeroDimensionsAreIOErrors) {
  TempDir dir;
  write_file(dir / "zero", {0, 0, 8, 0});
  EXPECT_NE(read_error(dir / "zero").find("declares 0 dimensions"), std::string::npos);
  write_file(dir / "many", {0, 0, 8, 200});
  EXPECT_NE(read_error(dir / "many").find("declares 200 dimensions"), std::string::npos);
}

TEST(Idx, TruncatedDataSaysWhatWasExpectedAndFound) {
  TempDir dir;
  const Bytes bytes = idx_bytes({2, 3}, iota_bytes(5));  // one byte short
  write_file(dir / "short", bytes);
  write_file(dir / "short.gz", gzip(bytes));
  for (const char* name : {"short", "short.gz"}) {
    const std::string message = read_error(dir / name);
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3] needs 6 bytes of data, found 5"), std::string::npos) << message;
    EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

TEST(Idx, TruncatedHeaderIsAnIOError) {
  TempDir dir;
  write_file(dir / "h", {0, 0, 8, 3, 0, 0, 0, 5, 0, 0});
  const std::string message = read_error(dir / "h");
  EXPECT_NE(message.find("expected 12 bytes of dimension sizes, found 6"), std::string::npos) << message;
}

TEST(Idx, HugeDeclaredShapeFailsWithoutAllocatingIt) {
  TempDir dir;
  // 2^31-1 cubed: no machine could hold it; the reader must find the data missing, not try to allocate it.
  write_file(dir / "huge", idx_bytes({0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF}, iota_bytes(10)));
  EXPECT_NE(read_error(dir / "huge").find("too large"), std::string::npos);
  write_file(dir / "big", idx_bytes({0x7FFFFFFF, 0x10}, iota_bytes(10)));
  EXPECT_NE(read_error(dir / "big").find("found 10"), std::string::npos);
}

TEST(Idx, AnEmptyShapeMustStillBeIndexable) {
  TempDir dir;
  // No elements, but the strides of the other dimensions would overflow int64.
  write_file(dir / "empty", idx_bytes({0, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF}, {}));
  EXPECT_NE(read_error(dir / "empty").find("too large to index"), std::string::npos);
}

TEST(Idx, AFifoIsRefusedWithoutWaitingForAWriter) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  const std::string message = read_error(dir / "fifo");
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
}

TEST(Idx, TrailingBytesAreAnIOError) {
  TempDir dir;
  write_file(dir / "long", idx_bytes({4}, iota_bytes(6)));
  const std::string message = read_error(dir / "long");
  EXPECT_NE(message.find("trailing bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("needs 4 bytes"), std::string::npos) << message;
}

TEST(Idx, CorruptGzipIsAnIOError) {
  TempDir dir;
  Bytes gz = gzip(idx_bytes({4}, iota_bytes(4)));
  gz[gz.size() - 6] ^= 0xFF;  // the CRC-32 of the data
  write_file(dir / "bad.gz", gz);
  const std::string message = read_error(dir / "bad.gz");
  EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
  EXPECT_NE(message.find("bad.gz"), std::string::npos) << message;
  // zlib's name for the stream, the descriptor, means nothing to the reader.
  EXPECT_EQ(message.find("<fd:"), std::string::npos) << message;
}

}  // namespace
}  // namespace strata
