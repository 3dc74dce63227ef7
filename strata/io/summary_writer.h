#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

// Note [TensorBoard event files]
// An event file is a sequence of TFRecords: the data's length (u64, little-endian), the masked CRC-32C of those 8
// bytes (u32), the data, and the masked CRC-32C of the data (u32); masked is ((crc >> 15) | (crc << 17)) +
// 0xa282ead8. Each record's data is a serialised tensorflow.Event protobuf: wall_time (field 1, double), step (2,
// int64), and either file_version (3, "brain.Event:2", the first record of every file) or summary (5), a Summary
// whose values (1) have a tag (1) and a simple_value (2, float) or a histo (5, HistogramProto: min 1, max 2, num 3,
// sum 4, sum_squares 5, bucket_limit 6 and bucket 7, packed doubles). That is all TensorBoard needs for scalars and
// histograms, as PyTorch's SummaryWriter writes them (no SummaryMetadata: TensorBoard's readers take simple_value
// and histo as the scalar and histogram plugins' data).
// Written by hand, not with Debian's libprotobuf: the generated code would need protoc at build time and the
// TensorFlow .proto files in the tree, and libstrata would link a 3 MB library for eleven fields of three
// messages, all of them encoded by the 60 lines of summary_writer.cpp. CRC-32C is the 256-entry table version: Debian
// has no C library for it (only python3-crc32c), and a hardware instruction would save nothing measurable at the
// size of these records.
// Each record reaches the file by one write(2) as soon as it is added: a process killed at any point (kill -9
// included) leaves every record it added, but for the one under way, which a kill can cut where the write crosses a
// page (Linux checks for a fatal signal between pages); readers take a file up to its last whole record. PyTorch
// queues up to ten events in memory instead, and loses them with the process.

/// The CRC-32C (Castagnoli) of `data`, as TFRecords use it: crc32c("123456789") is 0xE3069283.
uint32_t crc32c(std::string_view data);
/// TFRecord's masked CRC-32C of `data` (Note [TensorBoard event files]).
uint32_t masked_crc32c(std::string_view data);
/// `data` framed as one TFRecord: length, masked CRC of the length, data, masked CRC of the data.
std::string tfrecord(std::string_view data);

/// Writes TensorBoard event files into a directory, as PyTorch's torch.utils.tensorboard.SummaryWriter: scalars and
/// histograms by tag and step. The file is `<log_dir>/events.out.tfevents.<seconds>.<host>.<pid>.<n>`: TensorFlow's
/// name, with the process id and a count within the process (as TensorBoard's own writer adds) so that two writers
/// started in one second (add_scalars makes several) never share a file. Errors throw IOError naming the file.
/// One writer may be used from several threads: each record goes to the file whole, in the order the calls take.
class SummaryWriter {
 public:
  /// Creates `log_dir` (and its parents) when missing and a new event file in it, whose first record is the file
  /// version. `filename_suffix` is appended to the file's name.
  explicit SummaryWriter(std::filesystem::path log_dir, std::string filename_suffix = "");
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  /// Records `value` under `tag` at `step`; `walltime` (seconds since the epoch) defaults to now.
  void add_scalar(std::string_view tag, double value, int64_t step = 0, std::optional<double> walltime = {});
  /// As PyTorch: each `tag` of `values` goes to its own writer, in the directory `<log_dir>/<main_tag>_<tag>`, under
  /// the tag `main_tag`, so that TensorBoard draws them as runs on one chart. Those writers stay open until close().
  void add_scalars(std::string_view main_tag, const std::map<std::string, double>& values, int64_t step = 0,
                   std::optional<double> walltime = {});
  /// A histogram of `values` (any device and floating or integer dtype; read to the host as f64). `bins` is
  /// "tensorflow" (PyTorch's default: TensorFlow's fixed buckets, growing by 1.1x from 1e-12 to 1e20 either side of
  /// 0) or, as a number, that many buckets of equal width from the smallest value to the largest (NumPy's
  /// histogram). Only the buckets from the first to the last nonempty one are written, with an empty one before,
  /// as PyTorch does. Empty `values` or non-finite ones are an InvalidArgumentError.
  void add_histogram(std::string_view tag, const Tensor& values, int64_t step = 0, std::string_view bins = "tensorflow",
                     std::optional<double> walltime = {});
  void add_histogram(std::string_view tag, const Tensor& values, int64_t step, int64_t bins,
                     std::optional<double> walltime = {});
  void add_histogram(std::string_view tag, std::span<const double> values, int64_t step = 0,
                     std::string_view bins = "tensorflow", std::optional<double> walltime = {});
  void add_histogram(std::string_view tag, std::span<const double> values, int64_t step, int64_t bins,
                     std::optional<double> walltime = {});
  /// Asks the kernel to put what was written on disk (fdatasync), this writer's and add_scalars' writers': records
  /// already reach the file (and readers) as they are added.
  void flush();
  /// Closes the files; later calls throw IOError. Called by the destructor.
  void close();

  const std::filesystem::path& log_dir() const { return log_dir_; }
  /// The event file being written.
  const std::filesystem::path& file() const { return file_; }

 private:
  /// Event's fields that write_event() takes: file_version and summary.
  static constexpr uint32_t kFileVersion = 3, kSummary = 5;
  /// Writes one Event (wall_time, step, and `payload` as field `field`) as one whole record.
  void write_event(double walltime, int64_t step, uint32_t field, std::string_view payload);
  void write_histogram(std::string_view tag, std::span<const double> values, int64_t step,
                       const std::vector<double>& limits, std::optional<double> walltime);

  std::filesystem::path log_dir_;
  std::filesystem::path file_;
  std::string suffix_;
  int fd_ = -1;
  std::map<std::string, std::unique_ptr<SummaryWriter>> scalars_writers_;  // add_scalars', by directory name
  std::mutex mutex_;  // one record at a time, and not while closing
};

}  // namespace strata
