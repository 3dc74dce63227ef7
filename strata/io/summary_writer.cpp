#include "strata/io/summary_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>

#include "strata/core/error.h"

namespace strata {

namespace {

constexpr std::array<uint32_t, 256> kCrc32cTable = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // the reflected polynomial
    table[i] = c;
  }
  return table;
}();

// The few protobuf encodings the messages of Note [TensorBoard event files] need.
enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, Wire wire) { put_varint(out, (uint64_t{field} << 3) | wire); }

template <typename T>
void put_little_endian(std::string& out, T v) {
  static_assert(std::endian::native == std::endian::little, "event files are little-endian");
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_double(std::string& out, uint32_t field, double v) {
  put_key(out, field, kFixed64);
  put_little_endian(out, v);
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_packed_doubles(std::string& out, uint32_t field, const std::vector<double>& values) {
  put_key(out, field, kBytes);
  put_varint(out, values.size() * sizeof(double));
  for (const double v : values) put_little_endian(out, v);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// PyTorch's default bins ("tensorflow"): 1e-12, growing by 1.1x while under 1e20, mirrored below 0.
const std::vector<double>& tensorflow_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    std::vector<double> out;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) out.push_back(-*it);
    out.push_back(0);
    out.insert(out.end(), positive.begin(), positive.end());
    return out;
  }();
  return limits;
}

std::vector<double> limits_for(std::string_view bins, std::string_view tag) {
  STRATA_CHECK(bins == "tensorflow", InvalidArgumentError,
               "SummaryWriter.add_histogram('{}'): bins must be 'tensorflow' or a number of buckets, got '{}'", tag,
               bins);
  return tensorflow_limits();
}

// NumPy's histogram(values, bins=n): n buckets of equal width over [min, max], widened by 0.5 either side when the
// values are all equal.
std::vector<double> limits_for(int64_t bins, std::span<const double> values, std::string_view tag) {
  STRATA_CHECK(bins > 0, InvalidArgumentError,
               "SummaryWriter.add_histogram('{}'): bins must be a positive number of buckets, got {}", tag, bins);
  const auto [lo_it, hi_it] = std::minmax_element(values.begin(), values.end());
  double lo = *lo_it, hi = *hi_it;
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  std::vector<double> limits(static_cast<std::size_t>(bins) + 1);
  const double width = (hi - lo) / static_cast<double>(bins);
  for (int64_t i = 0; i < bins; ++i) limits[static_cast<std::size_t>(i)] = lo + static_cast<double>(i) * width;
  limits.back() = hi;
  return limits;
}

std::vector<double> host_values(const Tensor& values, std::string_view tag) {
  STRATA_CHECK(values.defined(), InvalidArgumentError, "SummaryWriter.add_histogram('{}'): the tensor is undefined",
               tag);
  const Tensor host = values.to(kCPU, DType::F64).contiguous();
  const double* data = host.data<double>();
  return std::vector<double>(data, data + host.numel());
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : data) crc = kCrc32cTable[(crc ^ static_cast<uint8_t>(c)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_little_endian(out, static_cast<uint64_t>(data.size()));
  put_little_endian(out, masked_crc32c(out));
  out.append(data);
  put_little_endian(out, masked_crc32c(data));
  return out;
}

SummaryWriter::SummaryWriter(std::filesystem::path log_dir, std::string filename_suffix)
    : log_dir_(std::move(log_dir)), suffix_(std::move(filename_suffix)) {
  STRATA_CHECK(log_dir_.native().find('\0') == std::string::npos, InvalidArgumentError,
               "SummaryWriter: the log directory's path holds a NUL byte");
  std::error_code ec;
  std::filesystem::create_directories(log_dir_, ec);
  STRATA_CHECK(!ec, IOError, "SummaryWriter: cannot create the log directory '{}': {}", log_dir_.string(),
               ec.message());
  STRATA_CHECK(std::filesystem::is_directory(log_dir_, ec), IOError,
               "SummaryWriter: the log directory '{}' is not a directory", log_dir_.string());
  static std::atomic<int64_t> files{0};
  const double wall = now_seconds();
  file_ = log_dir_ / fmt::format("events.out.tfevents.{:010d}.{}.{}.{}{}", static_cast<int64_t>(wall), host_name(),
                                 ::getpid(), files.fetch_add(1), suffix_);
  // O_EXCL: a new file, never another writer's; O_APPEND: each write(2) lands after the last whole record.
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
  STRATA_CHECK(fd_ >= 0, IOError, "SummaryWriter: cannot create the event file '{}': {}", file_.string(),
               std::strerror(errno));
  try {
    std::lock_guard lock(mutex_);
    write_event(wall, 0, kFileVersion, "brain.Event:2");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const Error&) {  // a destructor cannot report it; close() does for those who call it
  }
}

void SummaryWriter::write_event(double walltime, int64_t step, uint32_t field, std::string_view payload) {
  STRATA_CHECK(fd_ >= 0, IOError, "SummaryWriter: the event file '{}' is closed", file_.string());
  std::string event;
  put_double(event, 1, walltime);
  put_key(event, 2, kVarint);
  put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, field, payload);
  const std::string record = tfrecord(event);
  // One write(2) per record where the kernel takes it whole (always, for a regular file short of a full disk); a
  // short write goes on from where it stopped, so the record is still whole unless the process dies in between.
  std::size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, IOError, "SummaryWriter: cannot write to the event file '{}': {}", file_.string(),
                 n < 0 ? std::strerror(errno) : "nothing written");
    done += static_cast<std::size_t>(n);
  }
}

void SummaryWriter::add_scalar(std::string_view tag, double value, int64_t step, std::optional<double> walltime) {
  std::string item;
  put_bytes(item, 1, tag);
  put_key(item, 2, kFixed32);
  put_little_endian(item, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, item);
  std::lock_guard lock(mutex_);
  write_event(walltime.value_or(now_seconds()), step, kSummary, summary);
}

void SummaryWriter::add_scalars(std::string_view main_tag, const std::map<std::string, double>& values, int64_t step,
                                std::optional<double> walltime) {
  const double wall = walltime.value_or(now_seconds());
  std::string prefix(main_tag);
  std::replace(prefix.begin(), prefix.end(), '/', '_');  // as PyTorch: one directory per tag, not a tree
  for (const auto& [tag, value] : values) {
    const std::string name = prefix + "_" + tag;
    SummaryWriter* writer = nullptr;
    {
      std::lock_guard lock(mutex_);
      STRATA_CHECK(fd_ >= 0, IOError, "SummaryWriter: the event file '{}' is closed", file_.string());
      std::unique_ptr<SummaryWriter>& slot = scalars_writers_[name];
      if (!slot) slot = std::make_unique<SummaryWriter>(log_dir_ / name, suffix_);
      writer = slot.get();
    }
    writer->add_scalar(main_tag, value, step, wall);
  }
}

void SummaryWriter::write_histogram(std::string_view tag, std::span<const double> values, int64_t step,
                                    const std::vector<double>& limits, std::optional<double> walltime) {
  // Counts as NumPy's histogram(values, bins=limits): bucket i is [limits[i], limits[i + 1]), the last one closed;
  // values outside [limits.front(), limits.back()] are left out.
  const std::size_t buckets = limits.size() - 1;
  std::vector<double> counts(buckets, 0.0);
  double sum = 0, sum_squares = 0;
  for (const double v : values) {
    sum += v;
    sum_squares += v * v;
    if (v < limits.front() || v > limits.back()) continue;
    const std::size_t i =
        v == limits.back()
            ? buckets - 1
            : static_cast<std::size_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin()) - 1;
    counts[i] += 1;
  }
  // PyTorch's trimming: the buckets from the first nonempty one to the last, with one empty bucket before (or a
  // new one at the left end) because TensorBoard reads only right limits.
  std::size_t first = 0;
  while (first < buckets && counts[first] == 0) ++first;
  STRATA_CHECK(first < buckets, InvalidArgumentError,
               "SummaryWriter.add_histogram('{}'): no value falls in a bucket (TensorFlow's buckets end at +-1e20)",
               tag);
  std::size_t last = buckets - 1;
  while (counts[last] == 0) --last;
  std::vector<double> kept_counts, kept_limits(limits.begin() + static_cast<std::ptrdiff_t>(first),
                                               limits.begin() + static_cast<std::ptrdiff_t>(last) + 2);
  kept_counts.push_back(first > 0 ? counts[first - 1] : 0.0);
  kept_counts.insert(kept_counts.end(), counts.begin() + static_cast<std::ptrdiff_t>(first),
                     counts.begin() + static_cast<std::ptrdiff_t>(last) + 1);
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());

  std::string histo;
  put_double(histo, 1, *lo);
  put_double(histo, 2, *hi);
  put_double(histo, 3, static_cast<double>(values.size()));
  put_double(histo, 4, sum);
  put_double(histo, 5, sum_squares);
  put_packed_doubles(histo, 6, kept_limits);
  put_packed_doubles(histo, 7, kept_counts);
  std::string item;
  put_bytes(item, 1, tag);
  put_bytes(item, 5, histo);
  std::string summary;
  put_bytes(summary, 1, item);
  std::lock_guard lock(mutex_);
  write_event(walltime.value_or(now_seconds()), step, kSummary, summary);
}

namespace {
void check_histogram_values(std::string_view tag, std::span<const double> values) {
  STRATA_CHECK(!values.empty(), InvalidArgumentError, "SummaryWriter.add_histogram('{}'): no values", tag);
  const auto bad = std::find_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
  STRATA_CHECK(bad == values.end(), InvalidArgumentError,
               "SummaryWriter.add_histogram('{}'): value {} of {} is {}, and a histogram takes finite values only", tag,
               bad - values.begin(), values.size(), *bad);
}
}  // namespace

void SummaryWriter::add_histogram(std::string_view tag, std::span<const double> values, int64_t step,
                                  std::string_view bins, std::optional<double> walltime) {
  check_histogram_values(tag, values);
  write_histogram(tag, values, step, limits_for(bins, tag), walltime);
}

void SummaryWriter::add_histogram(std::string_view tag, std::span<const double> values, int64_t step, int64_t bins,
                                  std::optional<double> walltime) {
  check_histogram_values(tag, values);
  write_histogram(tag, values, step, limits_for(bins, values, tag), walltime);
}

void SummaryWriter::add_histogram(std::string_view tag, const Tensor& values, int64_t step, std::string_view bins,
                                  std::optional<double> walltime) {
  const std::vector<double> host = host_values(values, tag);
  add_histogram(tag, std::span<const double>(host), step, bins, walltime);
}

void SummaryWriter::add_histogram(std::string_view tag, const Tensor& values, int64_t step, int64_t bins,
                                  std::optional<double> walltime) {
  const std::vector<double> host = host_values(values, tag);
  add_histogram(tag, std::span<const double>(host), step, bins, walltime);
}

void SummaryWriter::flush() {
  std::lock_guard lock(mutex_);
  STRATA_CHECK(fd_ >= 0, IOError, "SummaryWriter: the event file '{}' is closed", file_.string());
  STRATA_CHECK(::fdatasync(fd_) == 0, IOError, "SummaryWriter: cannot flush the event file '{}': {}", file_.string(),
               std::strerror(errno));
  for (auto& [name, writer] : scalars_writers_) writer->flush();
}

void SummaryWriter::close() {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) return;
  for (auto& [name, writer] : scalars_writers_) writer->close();
  const int fd = fd_;
  fd_ = -1;
  STRATA_CHECK(::close(fd) == 0, IOError, "SummaryWriter: cannot close the event file '{}': {}", file_.string(),
               std::strerror(errno));
}

}  // namespace strata
