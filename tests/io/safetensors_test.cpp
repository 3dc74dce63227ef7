#include "strata/io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "test_devices.h"
#include "test_files.h"

namespace strata {
namespace {

using io::load_safetensors;
using io::save_safetensors;
using testing::Bytes;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

Bytes le64(uint64_t v) {
  Bytes b;
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
  return b;
}

template <typename T>
Bytes le_bytes(const std::vector<T>& values) {
  Bytes b(values.size() * sizeof(T));
  std::memcpy(b.data(), values.data(), b.size());  // the host is little-endian (checked in safetensors.cpp)
  return b;
}

// A file by the format's description: length, header padded with spaces to a multiple of 8, data.
Bytes safetensors_file(std::string header, const Bytes& data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out = le64(header.size());
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <typename T>
void expect_same(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.to_vector<T>(), b.to_vector<T>());
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  TempDir dir;
  io::TensorMap tensors = {
      {"f64", tensor<double>({1.5, -2.25, 1e300}, {3})},
      {"f32", tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
      {"f16", tensor<float>({0.5f, -1.0f, 65504.0f}).to(DType::F16)},
      {"bf16", tensor<float>({0.5f, -3.0f}).to(DType::BF16)},
      {"i64", tensor<int64_t>({-1, int64_t{1} << 40}, {2, 1})},
      {"i32", tensor<int32_t>({7, -8, 9}, {1, 3})},
      {"u8", tensor<uint8_t>({0, 255, 17})},
      {"bool", tensor<bool>({true, false, true, true}, {2, 2})},
      {"scalar", scalar_tensor(3.25)},
      {"empty", zeros({0, 4})},
  };
  const io::Metadata metadata = {{"format", "pt"}, {"epoch", "12"}, {"note", "ünïcode \"quoted\""}};
  save_safetensors(dir / "all.safetensors", tensors, metadata);
  const io::SafetensorsContent loaded = load_safetensors(dir / "all.safetensors");
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  expect_same<double>(loaded.tensors.at("f64"), tensors["f64"]);
  expect_same<float>(loaded.tensors.at("f32"), tensors["f32"]);
  expect_same<Half>(loaded.tensors.at("f16"), tensors["f16"]);
  expect_same<BFloat16>(loaded.tensors.at("bf16"), tensors["bf16"]);
  expect_same<int64_t>(loaded.tensors.at("i64"), tensors["i64"]);
  expect_same<int32_t>(loaded.tensors.at("i32"), tensors["i32"]);
  expect_same<uint8_t>(loaded.tensors.at("u8"), tensors["u8"]);
  expect_same<bool>(loaded.tensors.at("bool"), tensors["bool"]);
  expect_same<float>(loaded.tensors.at("scalar"), tensors["scalar"]);
  expect_same<float>(loaded.tensors.at("empty"), tensors["empty"]);
}

TEST(Safetensors, WritesExactlyTheBytesTheFormatDescribes) {
  TempDir dir;
  // {"attn0": f32 [1, 1, 2, 3] = 0..5}: a 65-byte header padded to 72, then 24 bytes of little-endian floats.
  save_safetensors(dir / "a.safetensors", {{"attn0", tensor<float>({0, 1, 2, 3, 4, 5}, {1, 1, 2, 3})}});
  const std::string header = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 65u);
  const std::string text = std::string("\x48\0\0\0\0\0\0\0", 8) + header + std::string(7, ' ');
  Bytes expected(text.begin(), text.end());
  for (unsigned char b : le_bytes<float>({0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f})) expected.push_back(b);
  EXPECT_EQ(read_file(dir / "a.safetensors"), expected);
}

TEST(Safetensors, MetadataComesFirstAndTensorsByDtypeWidthThenName) {
  TempDir dir;
  save_safetensors(dir / "m.safetensors",
                   {{"a", tensor<uint8_t>({1, 2, 3})}, {"b", tensor<float>({1})}, {"c", tensor<int64_t>({-2})}},
                   {{"framework", "strata"}});
  const std::string header = R"({"__metadata__":{"framework":"strata"},)"
                             R"("c":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                             R"("a":{"dtype":"U8","shape":[3],"data_offsets":[12,15]}})";
  Bytes data = le_bytes<int64_t>({-2});
  for (const Bytes& part : {le_bytes<float>({1.0f}), Bytes{1, 2, 3}}) data.insert(data.end(), part.begin(), part.end());
  EXPECT_EQ(read_file(dir / "m.safetensors"), safetensors_file(header, data));
}

TEST(Safetensors, EmptyFileHasJustBraces) {
  TempDir dir;
  save_safetensors(dir / "e.safetensors", {});
  EXPECT_EQ(read_file(dir / "e.safetensors"), (Bytes{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}));
  EXPECT_TRUE(load_safetensors(dir / "e.safetensors").tensors.empty());
}

TEST(Safetensors, LoadsAHandBuiltFile) {
  TempDir dir;
  // Written by hand, unpadded, in an order we would not write: a BF16 first, then an I32 matrix.
  const std::string header = R"({"w":{"dtype":"I32","shape":[2,2],"data_offsets":[4,20]},"__metadata__":{"k":"v"},)"
                             R"("h":{"data_offsets":[0,4],"shape":[2],"dtype":"BF16"}})";
  Bytes data = {0x80, 0x3F, 0x00, 0xC0};  // bf16 1.0 and -2.0
  const Bytes w = le_bytes<int32_t>({1, -2, 3, 400000});
  data.insert(data.end(), w.begin(), w.end());
  write_file(dir / "h.safetensors", safetensors_file(header, data, /*pad=*/false));
  const io::SafetensorsContent c = load_safetensors(dir / "h.safetensors");
  EXPECT_EQ(c.metadata, (io::Metadata{{"k", "v"}}));
  EXPECT_EQ(c.tensors.at("w").shape(), (Shape{2, 2}));
  EXPECT_EQ(c.tensors.at("w").to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 400000}));
  EXPECT_EQ(c.tensors.at("h").dtype(), DType::BF16);
  EXPECT_EQ(c.tensors.at("h").to(DType::F32).to_vector<float>(), (std::vector<float>{1.0f, -2.0f}));
}

TEST(Safetensors, NonContiguousTensorsAreWrittenContiguous) {
  TempDir dir;
  const Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t(a.storage(), DType::F32, {3, 2}, {1, 3}, 0);  // the transpose
  save_safetensors(dir / "t.safetensors", {{"t", t}});
  const Tensor back = load_safetensors(dir / "t.safetensors").tensors.at("t");
  EXPECT_EQ(back.shape(), (Shape{3, 2}));
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

bool has_temp_files(const TempDir& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().filename().string().find(".tmp-") != std::string::npos) return true;
  }
  return false;
}

TEST(Safetensors, FailedSaveLeavesThePreviousFileIntactAndNoTempFile) {
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  save_safetensors(path, {{"w", tensor<float>({1, 2, 3})}}, {{"step", "1"}});
  const Bytes before = read_file(path);
  // The save fails midway: the header and the first tensor are already written to the temporary file.
  io::detail::set_save_hook([](const std::string& name) {
    if (name == "b") throw IOError("simulated crash while writing 'b'");
  });
  EXPECT_THROW(save_safetensors(path, {{"a", zeros({1000})}, {"b", zeros({1000})}, {"c", zeros({10})}}), IOError);
  io::detail::set_save_hook(nullptr);
  EXPECT_EQ(read_file(path), before);
  EXPECT_FALSE(has_temp_files(dir));
  EXPECT_EQ(load_safetensors(path).metadata.at("step"), "1");
}

TEST(Safetensors, TwoSavesOfOnePathAtOnceEachWriteTheirOwnTemporaryFile) {
  TempDir dir;
  const auto path = dir / "race.safetensors";
  // Thread A stops midway through its save; meanwhile B saves the same path whole. A then fails; B's file must
  // survive, where a shared temporary name let A write into it and then lose its rename.
  std::atomic<int> stage{0};
  io::detail::set_save_hook([&](const std::string& name) {
    if (name != "a") return;
    stage = 1;
    while (stage != 2) std::this_thread::yield();
    throw IOError("simulated failure while writing 'a'");
  });
  std::thread a([&] { EXPECT_THROW(save_safetensors(path, {{"a", full({1000}, 1.0f)}}), IOError); });
  while (stage != 1) std::this_thread::yield();
  save_safetensors(path, {{"b", full({10}, 2.0f)}});
  stage = 2;
  a.join();
  io::detail::set_save_hook(nullptr);
  EXPECT_EQ(load_safetensors(path).tensors.at("b").to_vector<float>(), std::vector<float>(10, 2.0f));
  EXPECT_FALSE(has_temp_files(dir));
}

TEST(Safetensors, PathsThatAreNotFilesAreRefusedUpFront) {
  TempDir dir;
  try {
    save_safetensors("", {{"w", zeros({1})}});
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("names no file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(save_safetensors(dir / "sub/", {{"w", zeros({1})}}), IOError);
  // Opening a FIFO to read would wait for a writer.
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  try {
    load_safetensors(dir / "fifo");
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, InvalidInputIsRejectedBeforeTouchingTheFile) {
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  save_safetensors(path, {{"w", tensor<float>({1})}});
  const Bytes before = read_file(path);
  EXPECT_THROW(save_safetensors(path, {{"w", Tensor()}}), InvalidArgumentError);
  EXPECT_THROW(save_safetensors(path, {{"__metadata__", zeros({1})}}), InvalidArgumentError);
  EXPECT_EQ(read_file(path), before);
  EXPECT_FALSE(has_temp_files(dir));
}

TEST(Safetensors, SavingIntoAMissingDirectoryIsAnIOError) {
  TempDir dir;
  EXPECT_THROW(save_safetensors(dir / "no" / "x.safetensors", {{"w", zeros({1})}}), IOError);
}

TEST(Safetensors, OverwritesAnExistingFile) {
  TempDir dir;
  save_safetensors(dir / "x", {{"w", zeros({1})}});
  save_safetensors(dir / "x", {{"v", ones({2})}});
  const auto c = load_safetensors(dir / "x");
  ASSERT_EQ(c.tensors.size(), 1u);
  EXPECT_EQ(c.tensors.at("v").to_vector<float>(), (std::vector<float>{1, 1}));
}

class SafetensorsDevices : public ::testing::TestWithParam<Device> {};

TEST_P(SafetensorsDevices, SavesFromAndLoadsOntoTheDevice) {
  TempDir dir;
  const Tensor w = tensor<float>({1, -2, 3}, {3}, GetParam());
  save_safetensors(dir / "d", {{"w", w}});
  const Tensor back = load_safetensors(dir / "d", GetParam()).tensors.at("w");
  EXPECT_EQ(back.device(), w.device());
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, -2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Devices, SafetensorsDevices, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

// --- hostile files: each must give an IOError that names the file and says what is wrong ---

struct Corrupt {
  const char* name;
  Bytes bytes;
  const char* says;  // a piece of the message
};

std::ostream& operator<<(std::ostream& os, const Corrupt& c) { return os << c.name; }

Bytes one_f32(const std::string& entry, std::size_t data_bytes = 4) {
  return safetensors_file("{\"t\":" + entry + "}", Bytes(data_bytes, 0));
}

// The first bytes of another format's file, NULs included.
template <std::size_t N>
Bytes starting_with(const char (&start)[N]) {
  return Bytes(start, start + N - 1);
}

std::vector<Corrupt> corrupt_files() {
  const std::string ok_entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  Bytes huge = le64(uint64_t{1} << 62);
  Bytes longer_than_file = le64(1000);
  longer_than_file.insert(longer_than_file.end(), {'{', '}'});
  Bytes not_utf8 = safetensors_file("{\"t\xff\":" + ok_entry + "}", Bytes(4, 0));
  // Printing so deep a value into a message would overflow the stack (nlohmann's dump recurses per level).
  const std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  return {
      {"Empty", {}, "the file is 0 bytes"},
      {"ShortLength", {1, 0, 0}, "the file is 3 bytes"},
      {"HugeHeaderLength", huge, "more than the limit of 100000000 bytes"},
      {"HeaderLongerThanFile", longer_than_file, "header length is 1000 bytes but only 2 bytes follow"},
      {"NotJson", safetensors_file("{not json", {}), "not valid JSON"},
      {"NotAnObject", safetensors_file("[1, 2]", {}), "not a JSON object"},
      {"TrailingGarbage", safetensors_file("{} x", {}), "not valid JSON"},
      {"InvalidUtf8", not_utf8, "not valid UTF-8"},
      {"TorchZip", starting_with("PK\x03\x04\x14\x00\x00\x00\x00\x00"), "it looks like a zip archive"},
      {"Pickle", starting_with("\x80\x02}q\x00(X\x01\x00\x00\x00"), "it looks like a Python pickle"},
      {"EntryNotAnObject", one_f32("[1]"), "tensor 't': the entry is not an object"},
      {"MissingDtype", one_f32(R"({"shape":[1],"data_offsets":[0,4]})"), "tensor 't': the entry has no 'dtype'"},
      {"ExtraField", one_f32(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1})"), "unexpected field 'x'"},
      {"UnknownDtype", one_f32(R"({"dtype":"F33","shape":[1],"data_offsets":[0,4]})"), "unknown dtype 'F33'"},
      {"ForeignDtype", one_f32(R"({"dtype":"U32","shape":[1],"data_offsets":[0,4]})"), "U32 has no Strata"},
      {"NegativeDim", one_f32(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), "negative dimension"},
      {"FloatDim", one_f32(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), "not an integer"},
      {"ShapeNotArray", one_f32(R"({"dtype":"F32","shape":4,"data_offsets":[0,4]})"), "shape must be an array"},
      {"ShapeBytesMismatch", one_f32(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
       "shape [2] of F32 needs 8 bytes, but data_offsets [0, 4] hold 4"},
      {"OverflowingShape",
       one_f32(R"({"dtype":"F64","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]})"), "more than 2^63"},
      {"OffsetsNotTwo", one_f32(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})"), "two non-negative"},
      {"NegativeOffset", one_f32(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})"), "two non-negative"},
      {"BeginAfterEnd", one_f32(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", 8), "end before they begin"},
      {"OutOfRange", one_f32(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), "reach past the data"},
      {"Overlap",
       safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        Bytes(8, 0)),
       "tensor 'b': data_offsets [4, 8] overlap those of 'a' [0, 8]"},
      {"Hole",
       safetensors_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                        R"("b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
                        Bytes(3, 0)),
       "bytes [1, 2) before it belong to no tensor"},
      {"TrailingBytes", one_f32(ok_entry, 12), "8 trailing bytes"},
      {"DuplicateName", safetensors_file("{\"t\":" + ok_entry + ",\"t\":" + ok_entry + "}", Bytes(4, 0)),
       "names 't' twice"},
      {"MetadataNotStrings", safetensors_file(R"({"__metadata__":{"epoch":3}})", {}), "is not a string"},
      {"LeadingSpace", safetensors_file(" {}", {}), "must start with '{'"},
      {"DeepEntry", safetensors_file("{\"t\":" + deep + "}", {}), "nests values 4 levels deep"},
      {"DeepMetadata", safetensors_file(R"({"__metadata__":{"k":)" + deep + "}}", {}), "at most 3"},
      {"DeepShape", one_f32(R"({"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,4]})"), "at most 3"},
      {"NestedShape", one_f32(R"({"dtype":"F32","shape":[[1]],"data_offsets":[0,4]})"), "nests values 4 levels"},
      {"NulInHeader", safetensors_file("{\"t\":" + ok_entry + "}" + std::string("\0 {{", 4), Bytes(4, 0)),
       "NUL byte at offset"},
      {"MinusZeroDim", one_f32(R"({"dtype":"F32","shape":[-0],"data_offsets":[0,0]})", 0), "written as -0"},
      // No elements, but the other dimensions' strides would not fit in int64.
      {"EmptyButHuge",
       safetensors_file(R"({"t":{"dtype":"U8","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", {}),
       "more than 2^63 (too large to index)"},
      {"BoolNotZeroOrOne", safetensors_file(R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", {1, 7}),
       "holds byte 7"},
  };
}

class SafetensorsCorrupt : public ::testing::TestWithParam<Corrupt> {};

TEST_P(SafetensorsCorrupt, IsAnIOErrorNamingTheProblem) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  write_file(path, GetParam().bytes);
  try {
    load_safetensors(path);
    FAIL() << "no IOError";
  } catch (const IOError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(GetParam().says), std::string::npos) << message;
    EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, SafetensorsCorrupt, ::testing::ValuesIn(corrupt_files()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Safetensors, ManyTensorsRoundTrip) {
  TempDir dir;
  io::TensorMap tensors;
  for (int i = 0; i < 20'000; ++i) tensors.emplace(fmt::format("t{}", i), full({1}, static_cast<float>(i)));
  save_safetensors(dir / "many", tensors);
  const io::SafetensorsContent loaded = load_safetensors(dir / "many");
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  EXPECT_EQ(loaded.tensors.at("t12345").item<float>(), 12345.0f);
}

TEST(Safetensors, BytesInMemoryRoundTripAndMatchTheFile) {
  TempDir dir;
  const io::TensorMap tensors = {{"w", tensor<float>({1, 2})}, {"i", tensor<int64_t>({3})}};
  save_safetensors(dir / "f", tensors, {{"k", "v"}});
  const std::string bytes = io::save_safetensors_bytes(tensors, {{"k", "v"}});
  const Bytes file = read_file(dir / "f");
  EXPECT_EQ(Bytes(bytes.begin(), bytes.end()), file);
  const auto loaded = io::load_safetensors_bytes(bytes, kCPU, "<memory>");
  EXPECT_EQ(loaded.tensors.at("w").to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(loaded.metadata.at("k"), "v");
  try {
    io::load_safetensors_bytes(bytes.substr(0, 20), kCPU, "<memory>");
    FAIL() << "a cut file was accepted";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("<memory>"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, MetadataLargerThanLoadAcceptsIsRefusedAtSave) {
  TempDir dir;
  try {
    save_safetensors(dir / "big", {{"w", zeros({1})}}, {{"notes", std::string(100'000'001, 'x')}});
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the limit of 100000000 bytes"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "big"));
}

TEST(Safetensors, SpecialFilesAreNeverReplaced) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  try {
    save_safetensors(dir / "fifo", {{"w", zeros({1})}});
    FAIL() << "a FIFO was replaced";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("is a FIFO"), std::string::npos) << e.what();
  }
  struct stat st {};
  ASSERT_EQ(::lstat((dir / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  std::filesystem::create_symlink("/dev/null", dir / "null");
  EXPECT_THROW(save_safetensors(dir / "null", {{"w", zeros({1})}}), IOError);
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "null"));
  std::filesystem::create_directory(dir / "d");
  EXPECT_THROW(save_safetensors(dir / "d", {{"w", zeros({1})}}), IOError);
}

TEST(Safetensors, ANulInAPathIsRefusedRatherThanCutShort) {
  TempDir dir;
  const std::filesystem::path path = (dir.path() / "a").string() + std::string(1, '\0') + "b";
  EXPECT_THROW(save_safetensors(path, {{"w", zeros({1})}}), InvalidArgumentError);
  EXPECT_FALSE(std::filesystem::exists(dir / "a"));
  EXPECT_THROW(load_safetensors(path), InvalidArgumentError);
}

TEST(Safetensors, MissingFileOrDirectoryIsAnIOError) {
  TempDir dir;
  EXPECT_THROW(load_safetensors(dir / "missing"), IOError);
  EXPECT_THROW(load_safetensors(dir.path()), IOError);
}

}  // namespace
}  // namespace strata
