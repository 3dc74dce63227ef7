#include "strata/jit/jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "strata/core/error.h"
#include "strata/jit/cpu_dialect.h"
#include "strata/io/digest.h"
#include "strata/jit/kernel_cache.h"
#include "strata/runtime/environment.h"
#include "strata/runtime/kernel_assert.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"

extern char** environ;

namespace strata::jit {

// Note [Kernels compiled at run time on the CPU]
// A source is compiled for the CPU by the host C++ compiler that built Strata (STRATA_JIT_CXX overrides it) into a
// shared object that is dlopened. The translation unit is jit/cpu_dialect.h, then the user's source after
// rewrite_for_cpu (jit/source.h) under `#line 1 "<kernel>.cu"` (so the compiler's errors give the user's lines),
// then one entry point per kernel, `__strata_entry_<name>(Launch&, args, first block, end block)`, which runs a
// range of blocks on the calling thread. A launch spreads the blocks over Strata's thread pool. The object is built
// with -O3 -march=native, so the cache key has the CPU's model and flags. No shell is involved: the compiler is
// spawned with an argument vector, and only the options we understand reach it.

namespace {

constexpr int kCompileTimeoutSeconds = 300;
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxBlockThreads = 1024;  // as CUDA and HIP: a kernel written for the GPU runs unchanged
constexpr std::size_t kCpuMaxShared = std::size_t{64} << 20;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_CHECK(in.good(), IOError, "jit: cannot read {}", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  STRATA_CHECK(out.good(), IOError, "jit: cannot write {}", path.string());
}

// ---- the host compiler ----

std::string host_compiler() {
  if (auto cxx = environment_value("STRATA_JIT_CXX")) return *cxx;
  return STRATA_JIT_DEFAULT_CXX;
}

std::filesystem::path include_folder() {
  const std::filesystem::path folder =
      environment_value("STRATA_JIT_INCLUDE").value_or(std::string(STRATA_JIT_INCLUDE_DIR));
  std::error_code ec;
  STRATA_CHECK(std::filesystem::exists(folder / "strata" / "jit" / "cpu_dialect.h", ec), CompileError,
               "jit: Strata's headers are not in {} (strata/jit/cpu_dialect.h is missing); set STRATA_JIT_INCLUDE "
               "to the folder that holds strata/",
               folder.string());
  return folder;
}

/// The compiler's path, size and time of change: which compiler it is, without running it on every launch.
std::string compiler_identity(const std::string& cxx) {
  std::string path = cxx;
  if (cxx.find('/') == std::string::npos) {  // a name: the first match on PATH
    const char* env_path = std::getenv("PATH");
    std::stringstream dirs(env_path != nullptr ? env_path : "");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty() && access((std::filesystem::path(dir) / cxx).c_str(), X_OK) == 0) {
        path = (std::filesystem::path(dir) / cxx).string();
        break;
      }
    }
  }
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  struct stat st {};
  STRATA_CHECK(!ec && ::stat(real.c_str(), &st) == 0, CompileError,
               "jit: the C++ compiler '{}' was not found; kernels for the CPU need one (install g++, or set "
               "STRATA_JIT_CXX to a compiler)",
               cxx);
  return fmt::format("{} {} {}", real.string(), st.st_size, st.st_mtim.tv_sec);
}

/// This CPU's model and feature flags: the module is built for them (-march=native).
const std::string& cpu_identity() {
  static const std::string identity = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(in, line) && (model.empty() || flags.empty())) {
      if (line.starts_with("model name") && model.empty()) model = line;
      if (line.starts_with("flags") && flags.empty()) flags = line;
    }
    return model + "\n" + flags;
  }();
  return identity;
}

/// The text of the headers the CPU dialect includes: part of the key.
const std::string& dialect_headers(const std::filesystem::path& include) {
  static std::mutex mutex;
  static std::map<std::string, std::string> by_folder;
  std::lock_guard lock(mutex);
  std::string& text = by_folder[include.string()];
  if (text.empty()) {
    text =
        read_file(include / "strata" / "jit" / "cpu_dialect.h") + read_file(include / "strata" / "kernels" / "block.h");
  }
  return text;
}

/// The user's options as the host compiler takes them.
std::vector<std::string> cpu_options(const std::vector<std::string>& options) {
  static constexpr std::string_view kGpuOnly[] = {"-lineinfo",
                                                  "--restrict",
                                                  "-G",
                                                  "--device-debug",
                                                  "-arch",
                                                  "--gpu-architecture",
                                                  "--fmad",
                                                  "-ftz",
                                                  "-prec-div",
                                                  "-prec-sqrt",
                                                  "--extra-device-vectorization",
                                                  "-default-device"};
  std::vector<std::string> out;
  for (const std::string& o : options) {
    if (o.starts_with("-D") || o.starts_with("-U") || (o.starts_with("-I") && o.size() > 2) || o == "-O0" ||
        o == "-O1" || o == "-O2" || o == "-O3") {
      out.push_back(o);
    } else if (o == "--use_fast_math" || o == "-use_fast_math") {
      out.emplace_back("-ffast-math");
    } else if (o.starts_with("-std=") || o.starts_with("--std=")) {
      // The CPU dialect needs C++20 (coroutines for barriers); the kernel's own code is valid there too.
    } else if (std::any_of(std::begin(kGpuOnly), std::end(kGpuOnly), [&](std::string_view g) {
                 return o == g || (o.starts_with(g) && (o[g.size()] == '=' || o[g.size()] == '_'));
               })) {
      // An NVRTC option without meaning on the CPU: ignored, so that one option list serves every device.
    } else {
      STRATA_THROW(InvalidArgumentError,
                   "jit: the option '{}' is not understood for the CPU; it takes -D, -U, -I<dir>, -O0 to -O3, "
                   "--use_fast_math and -std= (C++20 is used), and ignores NVRTC's GPU-only options",
                   o);
    }
  }
  return out;
}

/// Runs argv, returning its exit status (or -signal) and what it wrote to stdout and stderr.
int run_compiler(const std::vector<std::string>& argv, std::string& output) {
  int pipe_fds[2];
  STRATA_CHECK(pipe2(pipe_fds, O_CLOEXEC) == 0, CompileError, "jit: pipe failed: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    STRATA_THROW(CompileError,
                 "jit: the C++ compiler '{}' could not be started ({}); kernels for the CPU need one (install g++, or "
                 "set STRATA_JIT_CXX)",
                 argv[0], std::strerror(spawned));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kCompileTimeoutSeconds);
  bool timed_out = false;
  std::array<char, 4096> buffer{};
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t got = ::read(pipe_fds[0], buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (output.size() < (1u << 20)) output.append(buffer.data(), static_cast<std::size_t>(got));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  STRATA_CHECK(!timed_out, CompileError, "jit: the C++ compiler took more than {} s and was stopped",
               kCompileTimeoutSeconds);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/// The translation unit compiled for the CPU.
std::string cpu_translation_unit(const std::string& source, const SourceInfo& info, const std::string& file_name) {
  std::string tu = "#include \"strata/jit/cpu_dialect.h\"\n";
  tu += fmt::format("#line 1 \"{}\"\n", file_name);
  tu += rewrite_for_cpu(source, info);
  tu += "\n#line 1 \"<strata entry points>\"\n";
  std::vector<std::string> done;
  for (const KernelDecl& k : info.kernels) {
    if (k.is_template || std::find(done.begin(), done.end(), k.name) != done.end()) continue;
    done.push_back(k.name);
    tu += fmt::format(
        "extern \"C\" void __strata_entry_{0}(::strata::jit::cpu::Launch& launch, void* const* args, std::int64_t "
        "begin, std::int64_t end) noexcept {{\n  ::strata::jit::cpu::run_blocks<&{0}, {1}>(launch, args, begin, "
        "end);\n}}\n",
        k.name, info.index_outside_kernels);
  }
  tu += "extern \"C\" unsigned __strata_abi_version() { return ::strata::jit::cpu::kAbiVersion; }\n";
  return tu;
}

std::string check_barriers(const SourceInfo& info) {
  if (info.barriers_outside_kernels.empty()) return {};
  return fmt::format(
      "__syncthreads() at line {} is outside a __global__ function; on the CPU a barrier must be in the kernel itself "
      "(its threads are coroutines there: Note [Threads of a block on the CPU])",
      info.barriers_outside_kernels.front());
}

struct CpuModule {
  void* handle = nullptr;
};

std::optional<CpuModule> open_cpu_module(const std::filesystem::path& path) {
  // dlopen answers a path it has loaded before from memory, without reading the file: look at the file itself.
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, sizeof magic);
  if (std::memcmp(magic,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return std::nullopt;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return std::nullopt;
  auto abi = reinterpret_cast<unsigned (*)()>(dlsym(handle, "__strata_abi_version"));
  if (abi == nullptr || abi() != cpu::kAbiVersion) {
    dlclose(handle);
    return std::nullopt;
  }
  return CpuModule{handle};  // never closed: launches on other threads may still run its code
}

struct CpuBuild {
  std::string key;
  std::vector<std::string> argv_tail;  // after the compiler: flags, then the source and output are added
  std::string cxx;
  std::string tu;
};

CpuBuild prepare_cpu(const std::string& source, const SourceInfo& info, const std::vector<std::string>& options,
                     const std::string& file_name) {
  if (std::string why = check_barriers(info); !why.empty()) STRATA_THROW(CompileError, "jit: {}", why);
  CpuBuild b;
  b.cxx = host_compiler();
  const std::filesystem::path include = include_folder();
  // 256-bit vectors even where AVX-512 exists: the masked 512-bit stores of a loop's tail cost ~15% of a vector
  // add on an AVX-512 EPYC (docs/benchmarks.md), as compilers for the host's own code decide by default.
  b.argv_tail = {"-std=c++20", "-O3",     "-march=native",        "-mprefer-vector-width=256",
                 "-fPIC",      "-shared", "-I" + include.string()};
  for (std::string& o : cpu_options(options)) b.argv_tail.push_back(std::move(o));
  b.tu = cpu_translation_unit(source, info, file_name);
  b.key = io::sha256_hex(fmt::format("strata-jit cpu abi {}\n{}\n{}\n{}\n{}\n{}", cpu::kAbiVersion,
                                         compiler_identity(b.cxx), cpu_identity(), fmt::join(b.argv_tail, " "),
                                         dialect_headers(include), b.tu));
  return b;
}

void build_cpu(const CpuBuild& b, const std::filesystem::path& out, const std::string& file_name) {
  const std::filesystem::path tu_path = out.string() + ".cpp";
  write_file(tu_path, b.tu);
  std::vector<std::string> argv{b.cxx};
  argv.insert(argv.end(), b.argv_tail.begin(), b.argv_tail.end());
  argv.insert(argv.end(), {"-x", "c++", tu_path.string(), "-o", out.string()});
  std::string log;
  int status = 0;
  try {
    status = run_compiler(argv, log);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tu_path, ec);
    throw;
  }
  std::error_code ec;
  std::filesystem::remove(tu_path, ec);
  STRATA_CHECK(status == 0, CompileError, "jit: compiling {} for the CPU failed ({} exited with {}):\n{}", file_name,
               b.cxx, status, log);
}

/// Loads the CPU module of a source, compiling it unless the cache has it.
CpuModule cpu_module(const std::string& source, const SourceInfo& info, const std::vector<std::string>& options,
                     const std::string& file_name, bool disk_cache) {
  const CpuBuild b = prepare_cpu(source, info, options, file_name);
  return detail::cached<CpuModule>(
      b.key, ".so", [&](const std::filesystem::path& out) { build_cpu(b, out, file_name); }, open_cpu_module,
      disk_cache);
}

// ---- GPU modules, through the plugin's compiler ----

std::string gpu_suffix(DeviceType type) { return type == DeviceType::HIP ? ".hsaco" : ".cubin"; }

std::string gpu_key(const DeviceCompiler& compiler, DeviceType type, const std::string& arch, const std::string& source,
                    const std::vector<std::string>& options) {
  return io::sha256_hex(fmt::format("strata-jit {} abi {}\n{}\n{}\n{}\n{}", device_type_name(type),
                                        cpu::kAbiVersion, compiler.identity(), arch, fmt::join(options, "\n"), source));
}

CompileResult gpu_binary(DeviceType type, const std::string& arch, const std::string& source,
                         const std::vector<std::string>& options, const std::string& file_name, bool* from_cache,
                         bool disk_cache = true) {
  const DeviceCompiler& compiler = device_compiler(type);
  const std::string key = gpu_key(compiler, type, arch, source, options);
  CompileResult result;
  result.binary = detail::cached<std::string>(
      key, gpu_suffix(type),
      [&](const std::filesystem::path& out) {
        CompileResult compiled = compiler.compile({source, file_name, options, arch});
        result.log = std::move(compiled.log);
        write_file(out, compiled.binary);
      },
      [](const std::filesystem::path& path) -> std::optional<std::string> {
        std::string bytes = read_file(path);
        if (bytes.empty()) return std::nullopt;
        return bytes;
      },
      disk_cache, from_cache);
  return result;
}

// ---- arguments ----

/// The bytes of one argument, as the kernel's parameter declares it.
using Slot = std::array<std::byte, 8>;

template <typename T>
Slot slot_of(T value) {
  Slot s{};
  std::memcpy(s.data(), &value, sizeof value);
  return s;
}

std::string describe(const KernelDecl& k, std::size_t i) {
  const KernelParam& p = k.params[i];
  return fmt::format("argument {} ({}{}{}) of kernel '{}'", i, p.type, p.name.empty() ? "" : " ", p.name, k.name);
}

std::string signature(const KernelDecl& k) {
  std::vector<std::string> params;
  for (const KernelParam& p : k.params) params.push_back(p.name.empty() ? p.type : p.type + " " + p.name);
  return fmt::format("{}({})", k.name, fmt::join(params, ", "));
}

Slot scalar_slot(const KernelDecl& k, std::size_t i, const Scalar& value) {
  const KernelParam& p = k.params[i];
  if (p.dtype == DType::F32) return slot_of(static_cast<float>(value.to_double()));
  if (p.dtype == DType::F64) return slot_of(value.to_double());
  if (p.dtype == DType::Bool) return slot_of(value.to_bool());
  STRATA_CHECK(value.kind() != Scalar::Kind::Float, InvalidArgumentError, "{} is an integer; got the number {}",
               describe(k, i), value.to_double());
  const int64_t v = value.to_int();
  if (p.bits == 32) {
    const bool fits = p.is_unsigned
                          ? v >= 0 && v <= std::numeric_limits<uint32_t>::max()
                          : v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    STRATA_CHECK(fits, InvalidArgumentError, "{}: {} does not fit in 32 bits", describe(k, i), v);
    return p.is_unsigned ? slot_of(static_cast<uint32_t>(v)) : slot_of(static_cast<int32_t>(v));
  }
  if (p.bits == 8) {
    STRATA_CHECK(v >= 0 && v <= 255, InvalidArgumentError, "{}: {} does not fit in 8 bits", describe(k, i), v);
    return slot_of(static_cast<uint8_t>(v));
  }
  STRATA_CHECK(!p.is_unsigned || v >= 0, InvalidArgumentError, "{} is unsigned; got {}", describe(k, i), v);
  return slot_of(v);
}

/// Checks a launch's arguments against the kernel's parameters and fills `slots`; returns the launch's device.
Device marshal(const KernelDecl& k, const std::vector<KernelArg>& args, std::vector<Slot>& slots) {
  STRATA_CHECK(args.size() == k.params.size(), InvalidArgumentError, "kernel {} takes {} argument{}; got {}",
               signature(k), k.params.size(), k.params.size() == 1 ? "" : "s", args.size());
  std::optional<Device> device;
  std::size_t device_from = 0;
  slots.assign(args.size(), Slot{});
  for (std::size_t i = 0; i < args.size(); ++i) {
    const KernelParam& p = k.params[i];
    STRATA_CHECK(p.supported, InvalidArgumentError,
                 "{} has a type a launch cannot pass; kernels take pointers to, and values of, bool, unsigned char, "
                 "int, unsigned, long long, unsigned long long, float, double (and half types on GPUs)",
                 describe(k, i));
    if (!p.pointer) {
      STRATA_CHECK(!args[i].is_tensor(), InvalidArgumentError, "{} is a number; got a tensor", describe(k, i));
      slots[i] = scalar_slot(k, i, args[i].number());
      continue;
    }
    STRATA_CHECK(args[i].is_tensor(), InvalidArgumentError, "{} is a pointer; got the number {} (pass a tensor)",
                 describe(k, i), args[i].number().to_double());
    const Tensor& t = args[i].tensor();
    STRATA_CHECK(t.defined(), InvalidArgumentError, "{}: the tensor is undefined", describe(k, i));
    STRATA_CHECK(t.dtype() == p.dtype, DTypeError, "{} points to {}; the tensor holds {}", describe(k, i),
                 dtype_name(p.dtype), dtype_name(t.dtype()));
    STRATA_CHECK(t.is_contiguous(), InvalidArgumentError,
                 "{}: the tensor is not contiguous (a kernel indexes memory directly); pass t.contiguous()",
                 describe(k, i));
    if (!device) {
      device = t.device();
      device_from = i;
    }
    STRATA_CHECK(t.device() == *device, DeviceMismatchError, "{} is on {}, but argument {} is on {}", describe(k, i),
                 t.device(), device_from, *device);
    slots[i] = slot_of(t.numel() == 0 ? static_cast<void*>(nullptr) : t.data_ptr());
  }
  return device.value_or(kCPU);
}

void check_geometry(const std::string& name, Dim3 grid, Dim3 block) {
  STRATA_CHECK(grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && block.x >= 1 && block.y >= 1 && block.z >= 1,
               InvalidArgumentError,
               "kernel '{}': grid ({}, {}, {}) and block ({}, {}, {}) must be at least 1 in every "
               "dimension",
               name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
  STRATA_CHECK(grid.x <= kMaxGridX && grid.y <= kMaxGridYZ && grid.z <= kMaxGridYZ, InvalidArgumentError,
               "kernel '{}': grid ({}, {}, {}) is larger than a launch allows ({}, {}, {})", name, grid.x, grid.y,
               grid.z, kMaxGridX, kMaxGridYZ, kMaxGridYZ);
  const int64_t threads = static_cast<int64_t>(block.x) * block.y * block.z;
  STRATA_CHECK(threads <= kMaxBlockThreads && block.z <= 64, InvalidArgumentError,
               "kernel '{}': a block of ({}, {}, {}) = {} threads; at most {} threads (and 64 in z)", name, block.x,
               block.y, block.z, threads, kMaxBlockThreads);
}

}  // namespace

// ---- Target ----

Target Target::parse(const std::string& text) {
  if (text == "cpu") return {DeviceType::CPU, ""};
  const auto colon = text.find(':');
  const std::string type = text.substr(0, colon), arch = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (type == "cuda" && arch.starts_with("sm_") && arch.size() > 3) return {DeviceType::CUDA, arch};
  if (type == "hip" && arch.starts_with("gfx") && arch.size() > 3) return {DeviceType::HIP, arch};
  STRATA_THROW(InvalidArgumentError,
               "jit: target '{}' is not one of: cpu, cuda:sm_XY (e.g. cuda:sm_90), hip:gfxNNN (e.g. hip:gfx90a)", text);
}

std::string Target::to_string() const {
  return type == DeviceType::CPU ? std::string("cpu") : fmt::format("{}:{}", device_type_name(type), arch);
}

Compiled compile(const std::string& source, const Target& target, const std::vector<std::string>& options) {
  const SourceInfo info = scan_source(source);
  Compiled out;
  if (target.type == DeviceType::CPU) {
    const CpuBuild b = prepare_cpu(source, info, options, "kernel.cu");
    out.binary = detail::cached<std::string>(
        b.key, ".so", [&](const std::filesystem::path& path) { build_cpu(b, path, "kernel.cu"); },
        [](const std::filesystem::path& path) -> std::optional<std::string> {
          if (!open_cpu_module(path)) return std::nullopt;
          return read_file(path);
        },
        /*use_disk=*/true, &out.from_cache);
    return out;
  }
  STRATA_CHECK(!target.arch.empty(), InvalidArgumentError, "jit: target {} needs an architecture",
               device_type_name(target.type));
  CompileResult r = gpu_binary(target.type, target.arch, source, options, "kernel.cu", &out.from_cache);
  out.binary = std::move(r.binary);
  out.log = std::move(r.log);
  return out;
}

// ---- RawKernel ----

struct RawKernel::State {
  std::string source, name, file_name;
  std::vector<std::string> options;
  bool disk_cache = true;
  SourceInfo info;
  const KernelDecl* decl = nullptr;
  std::mutex mutex;
  void* cpu_entry = nullptr;
  std::map<std::pair<int, int>, std::shared_ptr<LoadedModule>> gpu_modules;  // (device type, index)
};

RawKernel::RawKernel(std::string source, std::string name, std::vector<std::string> options, bool disk_cache)
    : state_(std::make_shared<State>()) {
  state_->disk_cache = disk_cache;
  state_->source = std::move(source);
  state_->name = std::move(name);
  state_->options = std::move(options);
  state_->file_name = state_->name + ".cu";
  state_->info = scan_source(state_->source);
  state_->decl = &find_kernel(state_->info, state_->name);
}

const std::string& RawKernel::name() const { return state_->name; }
const KernelDecl& RawKernel::declaration() const { return *state_->decl; }

namespace {

using CpuEntry = void (*)(cpu::Launch&, void* const*, int64_t, int64_t) noexcept;

}  // namespace

void RawKernel::compile_for(Device device) const {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (device.is_cpu()) {
    if (s.cpu_entry != nullptr) return;
    const CpuModule module = cpu_module(s.source, s.info, s.options, s.file_name, s.disk_cache);
    s.cpu_entry = dlsym(module.handle, ("__strata_entry_" + s.name).c_str());
    STRATA_CHECK(s.cpu_entry != nullptr, CompileError, "jit: the compiled module has no entry for kernel '{}'", s.name);
    return;
  }
  const Device d = resolve(device);
  auto& slot = s.gpu_modules[{static_cast<int>(d.type()), d.index()}];
  if (slot) return;
  const DeviceCompiler& compiler = device_compiler(d.type());
  const std::string arch = compiler.device_arch(d.index());
  const CompileResult binary = gpu_binary(d.type(), arch, s.source, s.options, s.file_name, nullptr, s.disk_cache);
  try {
    slot = compiler.load(d.index(), binary.binary);
  } catch (const BackendError&) {
    // A cached entry the driver refuses: remove it and compile once more.
    detail::discard(gpu_key(compiler, d.type(), arch, s.source, s.options), gpu_suffix(d.type()));
    slot = compiler.load(d.index(),
                         gpu_binary(d.type(), arch, s.source, s.options, s.file_name, nullptr, s.disk_cache).binary);
  }
}

void RawKernel::operator()(Dim3 grid, Dim3 block, const std::vector<KernelArg>& args, std::size_t shared_bytes) const {
  const State& s = *state_;
  const KernelDecl& k = *s.decl;
  check_geometry(k.name, grid, block);
  std::vector<Slot> slots;
  const Device device = marshal(k, args, slots);
  std::vector<void*> pointers(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) pointers[i] = slots[i].data();
  compile_for(device);
  // A tensor passed as a pointer to non-const may be written: autograd must see it as changed in place.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (k.params[i].pointer && !k.params[i].is_const) args[i].tensor().bump_version();
  }
  if (!device.is_cpu()) {
    const Device d = resolve(device);
    const DeviceCompiler& compiler = device_compiler(d.type());
    STRATA_CHECK(shared_bytes <= compiler.max_shared_bytes(d.index()), InvalidArgumentError,
                 "kernel '{}': {} bytes of dynamic shared memory; {} allows at most {} per block", k.name, shared_bytes,
                 d, compiler.max_shared_bytes(d.index()));
    const int64_t threads = static_cast<int64_t>(block.x) * block.y * block.z;
    STRATA_CHECK(threads <= compiler.max_block_threads(d.index()), InvalidArgumentError,
                 "kernel '{}': a block of {} threads; {} allows at most {}", k.name, threads, d,
                 compiler.max_block_threads(d.index()));
    std::shared_ptr<LoadedModule> module;
    {
      std::lock_guard lock(state_->mutex);
      module = state_->gpu_modules.at({static_cast<int>(d.type()), d.index()});
    }
    // A failed assert traps the kernel; the error surfaces at a later synchronisation, as any GPU error does. The
    // assert's record lives in host memory, so the next launch of the module names it even if nothing synchronised.
    const auto raise_assert = [&](const AssertFailure& f) {
      STRATA_THROW(DeviceAssertError, "kernel '{}' ({}:{}, in {}): assertion `{}` failed on {}", k.name, f.file, f.line,
                   f.function, f.condition, d);
    };
    if (auto earlier = module->take_assert_failure()) raise_assert(*earlier);
    const NativeStream stream = current_native_stream(d);
    module->launch(k.name, grid, block, shared_bytes, stream, pointers.data());
    if (launch_blocking()) {  // STRATA_LAUNCH_BLOCKING=1: report the kernel's failure at its launch
      try {
        backend(d).synchronize_stream(d.index(), stream);
      } catch (const BackendError&) {
        if (auto failure = module->take_assert_failure()) raise_assert(*failure);
        throw;
      }
    }
    return;
  }
  STRATA_CHECK(shared_bytes <= kCpuMaxShared, InvalidArgumentError,
               "kernel '{}': {} bytes of dynamic shared memory; the CPU allows at most {} per block", k.name,
               shared_bytes, kCpuMaxShared);
  const auto entry = reinterpret_cast<CpuEntry>(s.cpu_entry);
  cpu::Launch launch;
  launch.grid = {grid.x, grid.y, grid.z};
  launch.block = {block.x, block.y, block.z};
  launch.dynamic_shared = shared_bytes;
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  const int64_t threads = static_cast<int64_t>(block.x) * block.y * block.z;
  const int64_t grain = std::max<int64_t>(1, 32768 / threads);
  void* const* argv = pointers.data();
  parallel_for(blocks, grain, [&](int64_t begin, int64_t end) { entry(launch, argv, begin, end); });
  if (launch.failed != 0) {
    const std::string where =
        fmt::format("block ({}, {}, {}) thread ({}, {}, {})", launch.failed_block.x, launch.failed_block.y,
                    launch.failed_block.z, launch.failed_thread.x, launch.failed_thread.y, launch.failed_thread.z);
    STRATA_CHECK(launch.line == 0, DeviceAssertError, "kernel '{}' ({}:{}): assertion `{}` failed in {}", k.name,
                 s.file_name, launch.line, launch.message, where);
    STRATA_THROW(Error, "kernel '{}' on the CPU threw in {}: {}", k.name, where, launch.message);
  }
}

}  // namespace strata::jit
