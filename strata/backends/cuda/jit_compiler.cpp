// The GPU half of the run-time compiler (strata/jit/compiler.h): NVRTC in libstrata_cuda, hiprtc in libstrata_hip,
// from this one source (Note [One source for NVIDIA and AMD] in kernels/gpu_vendor.h).
//
// Note [The GPU half of the run-time compiler]
// compile() needs no GPU and no driver: NVRTC and hiprtc compile for a named architecture, so a kernel can be
// compiled (and its errors reported) on a build machine. Hence:
//  - the compiler library is loaded with dlopen, never linked, so that the plugin loads without it and says how to
//    get it (jit::device_compiler names the reason). NVRTC is libnvrtc.so.<CUDA major> from the loader's path (which
//    includes the toolkit this plugin was built with, through its RUNPATH), the toolkit folders, or the
//    nvidia-cuda-nvrtc wheel (site-packages/nvidia/cu13/lib, nvidia/cuda_nvrtc/lib for CUDA 12); hiprtc lives in
//    libamdhip64.so.5 (libhiprtc.so.5 in later ROCm);
//  - the CUDA plugin reaches the driver API (modules, launches) through cudaGetDriverEntryPointByVersion at the first
//    load(), not by linking libcuda.so.1, which a machine without the driver lacks; the HIP plugin calls hipModule*
//    of libamdhip64, which it links anyway;
//  - the architecture is checked before the compiler sees it: NVRTC rejects an unknown one cleanly, but the
//    hiprtc of ROCm 5.2 crashes the process (a freed invalid pointer) on an --offload-arch it does not know.
// An sm_XY newer than NVRTC knows (nvrtcGetSupportedArchs) is compiled to PTX for the newest compute_XY it knows,
// which the driver compiles for the device when the module is loaded; a known one gives a cubin. Every compile gets
// the dialect's prelude (strata/jit/gpu_dialect.h), then `#line 1 "<file>"`, so that the compiler's messages name
// the user's file and lines.

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "strata/backends/cuda/cuda_check.h"
#include "strata/core/error.h"
#include "strata/core/macros.h"
#include "strata/jit/compiler.h"
#include "strata/jit/gpu_dialect.h"
#include "strata/kernels/gpu_vendor.h"

#if defined(STRATA_GPU_HIP)
#include <hip/hip_version.h>
#include <hip/hiprtc.h>
#else
#include <cuda.h>
#include <nvrtc.h>
#endif

namespace strata::cuda {

namespace {

#if defined(STRATA_GPU_HIP)
using RtcResult = hiprtcResult;
using RtcProgram = hiprtcProgram;
constexpr RtcResult kRtcSuccess = HIPRTC_SUCCESS;
constexpr const char* kRtcName = "hiprtc";
using ModuleHandle = hipModule_t;
using FunctionHandle = hipFunction_t;
#else
using RtcResult = nvrtcResult;
using RtcProgram = nvrtcProgram;
constexpr RtcResult kRtcSuccess = NVRTC_SUCCESS;
constexpr const char* kRtcName = "NVRTC";
using ModuleHandle = CUmodule;
using FunctionHandle = CUfunction;
#endif

Device gpu(int index) { return Device(kGpuType, index); }

// --- finding the compiler library ------------------------------------------------------------------------------------

/// The folder this plugin was loaded from.
std::filesystem::path plugin_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

struct OpenedLibrary {
  void* handle = nullptr;
  std::string path;
};

/// Tries `file` on the loader's path, then in each folder; `tried` lists the folders, `errors` what dlopen said about
/// a file that exists but did not load.
OpenedLibrary open_library(const std::string& file, const std::vector<std::filesystem::path>& folders,
                           std::vector<std::string>& tried, std::vector<std::string>& errors) {
  if (void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return {handle, file};
  for (const auto& folder : folders) {
    if (folder.empty()) continue;
    const auto path = folder / file;
    std::error_code ec;
    if (std::find(tried.begin(), tried.end(), folder.string()) == tried.end()) tried.push_back(folder.string());
    if (!std::filesystem::exists(path, ec)) continue;
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return {handle, path.string()};
    const char* err = dlerror();
    errors.push_back(fmt::format("{}: {}", path.string(), err ? err : "unknown error"));
  }
  return {};
}

template <typename F>
bool find_symbol(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  return fn != nullptr;
}

/// The vendor compiler's entry points, found with dlsym. The types come from the vendor's header.
struct RtcLibrary {
  OpenedLibrary library;
#if defined(STRATA_GPU_HIP)
  decltype(&hiprtcGetErrorString) get_error_string = nullptr;
  decltype(&hiprtcVersion) version = nullptr;
  decltype(&hiprtcCreateProgram) create_program = nullptr;
  decltype(&hiprtcDestroyProgram) destroy_program = nullptr;
  decltype(&hiprtcCompileProgram) compile_program = nullptr;
  decltype(&hiprtcGetProgramLogSize) get_log_size = nullptr;
  decltype(&hiprtcGetProgramLog) get_log = nullptr;
  decltype(&hiprtcGetCodeSize) get_code_size = nullptr;
  decltype(&hiprtcGetCode) get_code = nullptr;
#else
  decltype(&nvrtcGetErrorString) get_error_string = nullptr;
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcCreateProgram) create_program = nullptr;
  decltype(&nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&nvrtcCompileProgram) compile_program = nullptr;
  decltype(&nvrtcGetProgramLogSize) get_log_size = nullptr;
  decltype(&nvrtcGetProgramLog) get_log = nullptr;
  decltype(&nvrtcGetCUBINSize) get_code_size = nullptr;  // the cubin
  decltype(&nvrtcGetCUBIN) get_code = nullptr;
  decltype(&nvrtcGetPTXSize) get_ptx_size = nullptr;
  decltype(&nvrtcGetPTX) get_ptx = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) get_num_supported_archs = nullptr;
  decltype(&nvrtcGetSupportedArchs) get_supported_archs = nullptr;
#endif

  /// Finds every entry point; the name of the first one missing otherwise.
  std::optional<std::string> bind() {
    void* h = library.handle;
#if defined(STRATA_GPU_HIP)
#define STRATA_RTC_SYMBOL(member, name) \
  if (!find_symbol(h, #name, member)) return std::string(#name)
    STRATA_RTC_SYMBOL(get_error_string, hiprtcGetErrorString);
    STRATA_RTC_SYMBOL(version, hiprtcVersion);
    STRATA_RTC_SYMBOL(create_program, hiprtcCreateProgram);
    STRATA_RTC_SYMBOL(destroy_program, hiprtcDestroyProgram);
    STRATA_RTC_SYMBOL(compile_program, hiprtcCompileProgram);
    STRATA_RTC_SYMBOL(get_log_size, hiprtcGetProgramLogSize);
    STRATA_RTC_SYMBOL(get_log, hiprtcGetProgramLog);
    STRATA_RTC_SYMBOL(get_code_size, hiprtcGetCodeSize);
    STRATA_RTC_SYMBOL(get_code, hiprtcGetCode);
#else
#define STRATA_RTC_SYMBOL(member, name) \
  if (!find_symbol(h, #name, member)) return std::string(#name)
    STRATA_RTC_SYMBOL(get_error_string, nvrtcGetErrorString);
    STRATA_RTC_SYMBOL(version, nvrtcVersion);
    STRATA_RTC_SYMBOL(create_program, nvrtcCreateProgram);
    STRATA_RTC_SYMBOL(destroy_program, nvrtcDestroyProgram);
    STRATA_RTC_SYMBOL(compile_program, nvrtcCompileProgram);
    STRATA_RTC_SYMBOL(get_log_size, nvrtcGetProgramLogSize);
    STRATA_RTC_SYMBOL(get_log, nvrtcGetProgramLog);
    STRATA_RTC_SYMBOL(get_code_size, nvrtcGetCUBINSize);
    STRATA_RTC_SYMBOL(get_code, nvrtcGetCUBIN);
    STRATA_RTC_SYMBOL(get_ptx_size, nvrtcGetPTXSize);
    STRATA_RTC_SYMBOL(get_ptx, nvrtcGetPTX);
    STRATA_RTC_SYMBOL(get_num_supported_archs, nvrtcGetNumSupportedArchs);
    STRATA_RTC_SYMBOL(get_supported_archs, nvrtcGetSupportedArchs);
#endif
#undef STRATA_RTC_SYMBOL
    return std::nullopt;
  }
};

#if defined(STRATA_GPU_HIP)
// HIP's major version is in the file names: libamdhip64.so.5 holds hiprtc in ROCm 5; ROCm 6 splits it out.
const std::string kRtcFile = fmt::format("libamdhip64.so.{}", HIP_VERSION_MAJOR);
const std::string kRtcFallbackFile = fmt::format("libhiprtc.so.{}", HIP_VERSION_MAJOR);

std::vector<std::filesystem::path> rtc_folders() {
  return {"/opt/rocm/lib", "/usr/lib/x86_64-linux-gnu", plugin_folder()};
}

std::string missing_rtc_reason(const std::vector<std::string>& tried, const std::vector<std::string>& errors) {
  return fmt::format(
      "hiprtc ({} or {}) was not found in the loader's path nor in {}{}: install ROCm's HIP runtime "
      "(Debian: apt install libamdhip64-5)",
      kRtcFile, kRtcFallbackFile, fmt::join(tried, ", "),
      errors.empty() ? "" : fmt::format(" ({})", fmt::join(errors, "; ")));
}
#else
// NVRTC's soname carries the CUDA major version it shares with the runtime this plugin was built for.
const std::string kRtcFile = fmt::format("libnvrtc.so.{}", CUDA_VERSION / 1000);

std::vector<std::filesystem::path> rtc_folders() {
  std::vector<std::filesystem::path> folders;
#if defined(STRATA_CUDA_TOOLKIT_LIBRARY_DIR)
  folders.emplace_back(STRATA_CUDA_TOOLKIT_LIBRARY_DIR);
#endif
  folders.emplace_back("/usr/local/cuda/lib64");
  folders.emplace_back("/usr/local/cuda/lib");
  // The nvidia-cuda-nvrtc wheel: CUDA 13's wheels share site-packages/nvidia/cu13/lib, CUDA 12's had a folder each.
  // Found where CMake's python3 had it, and beside a plugin installed in site-packages (strata/lib or strata/).
  const std::string wheel_lib = fmt::format("cu{}/lib", CUDA_VERSION / 1000);
  std::vector<std::filesystem::path> nvidia_roots;
#if defined(STRATA_NVIDIA_WHEEL_ROOT)
  nvidia_roots.emplace_back(STRATA_NVIDIA_WHEEL_ROOT);
#endif
  const auto plugin = plugin_folder();
  if (!plugin.empty()) {
    nvidia_roots.push_back(plugin.parent_path() / "nvidia");
    nvidia_roots.push_back(plugin.parent_path().parent_path() / "nvidia");
  }
  for (const auto& root : nvidia_roots) {
    folders.push_back(root / wheel_lib);
    folders.push_back(root / "cuda_nvrtc" / "lib");
  }
  return folders;
}

std::string missing_rtc_reason(const std::vector<std::string>& tried, const std::vector<std::string>& errors) {
  return fmt::format(
      "NVRTC ({}) was not found in the loader's path nor in {}{}: install the CUDA toolkit's NVRTC "
      "or `pip install nvidia-cuda-nvrtc`",
      kRtcFile, fmt::join(tried, ", "), errors.empty() ? "" : fmt::format(" ({})", fmt::join(errors, "; ")));
}
#endif

/// The compiler library, or nullptr with the reason.
std::unique_ptr<RtcLibrary> load_rtc(std::string& reason) {
  std::vector<std::string> tried, errors;
  auto rtc = std::make_unique<RtcLibrary>();
  rtc->library = open_library(kRtcFile, rtc_folders(), tried, errors);
#if defined(STRATA_GPU_HIP)
  if (rtc->library.handle == nullptr) rtc->library = open_library(kRtcFallbackFile, rtc_folders(), tried, errors);
#endif
  if (rtc->library.handle == nullptr) {
    reason = missing_rtc_reason(tried, errors);
    return nullptr;
  }
  if (const auto missing = rtc->bind()) {
    reason = fmt::format("{} {} lacks {}: it is not the {} this plugin was built for", kRtcName, rtc->library.path,
                         *missing, kRtcName);
    return nullptr;
  }
  return rtc;
}

// --- architectures ---------------------------------------------------------------------------------------------------

/// What compile() asks the vendor compiler for.
struct Target {
  std::string option;  // --gpu-architecture=sm_90, --offload-arch=gfx90a
  bool ptx = false;    // NVRTC: PTX rather than a cubin
  std::string note;    // said in the result's log
};

#if defined(STRATA_GPU_HIP)
// The processors of ROCm 5.2's LLVM (clang --target=amdgcn-amd-amdhsa -print-supported-cpus). A ROCm with a newer
// LLVM knows more: add them here with the ROCm the plugin is built against.
constexpr const char* kAmdProcessors[] = {
    "gfx600",  "gfx601",  "gfx602",  "gfx700",  "gfx701",  "gfx702",  "gfx703",  "gfx704",  "gfx705",  "gfx801",
    "gfx802",  "gfx803",  "gfx805",  "gfx810",  "gfx900",  "gfx902",  "gfx904",  "gfx906",  "gfx908",  "gfx909",
    "gfx90a",  "gfx90c",  "gfx940",  "gfx1010", "gfx1011", "gfx1012", "gfx1013", "gfx1030", "gfx1031", "gfx1032",
    "gfx1033", "gfx1034", "gfx1035", "gfx1036", "gfx1100", "gfx1101", "gfx1102", "gfx1103"};

/// A target ID, "gfx90a" or "gfx90a:sramecc+:xnack-" (processor, then features each switched on or off).
bool known_target_id(const std::string& arch) {
  const auto colon = arch.find(':');
  const std::string processor = arch.substr(0, colon);
  if (std::none_of(std::begin(kAmdProcessors), std::end(kAmdProcessors), [&](const char* p) { return processor == p; }))
    return false;
  for (std::size_t at = colon; at != std::string::npos;) {
    const auto next = arch.find(':', at + 1);
    const std::string feature = arch.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (feature != "sramecc+" && feature != "sramecc-" && feature != "xnack+" && feature != "xnack-") return false;
    at = next;
  }
  return true;
}

Target target_for(const RtcLibrary&, const std::string& identity, const std::string& arch) {
  STRATA_CHECK(known_target_id(arch), InvalidArgumentError,
               "unknown architecture '{}' for {}: expected an AMD GPU's processor such as gfx90a, optionally with "
               "features (gfx90a:xnack-); known processors: {}",
               arch, identity, fmt::join(std::begin(kAmdProcessors), std::end(kAmdProcessors), ", "));
  return {"--offload-arch=" + arch, false, {}};
}
#else
/// The architectures this NVRTC compiles for, as numbers (75, 80, ..., 121).
std::vector<int> supported_archs(const RtcLibrary& rtc) {
  int count = 0;
  if (rtc.get_num_supported_archs(&count) != kRtcSuccess || count <= 0) return {};
  std::vector<int> archs(static_cast<std::size_t>(count));
  if (rtc.get_supported_archs(archs.data()) != kRtcSuccess) return {};
  std::sort(archs.begin(), archs.end());
  return archs;
}

/// "sm_90" -> 90 and "" ; "sm_90a" -> 90 and "a"; nullopt when `text` is not <prefix><digits>[a|f].
std::optional<std::pair<int, std::string> > parse_arch(const std::string& text, const std::string& prefix) {
  if (text.rfind(prefix, 0) != 0) return std::nullopt;
  std::size_t end = prefix.size();
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == prefix.size() || end - prefix.size() > 4) return std::nullopt;
  const std::string suffix = text.substr(end);
  if (!suffix.empty() && suffix != "a" && suffix != "f") return std::nullopt;
  return std::pair{std::stoi(text.substr(prefix.size(), end - prefix.size())), suffix};
}

Target target_for(const RtcLibrary& rtc, const std::string& identity, const std::string& arch) {
  const auto archs = supported_archs(rtc);
  const auto known = fmt::format("sm_{}", fmt::join(archs, ", sm_"));
  auto parsed = parse_arch(arch, "sm_");
  const bool virtual_arch = !parsed && (parsed = parse_arch(arch, "compute_"));
  STRATA_CHECK(parsed.has_value(), InvalidArgumentError,
               "unknown architecture '{}' for {}: expected sm_XY (the compute capability X.Y) or compute_XY for "
               "PTX; this NVRTC knows {}",
               arch, identity, known);
  const auto [number, suffix] = *parsed;
  if (std::binary_search(archs.begin(), archs.end(), number)) return {"--gpu-architecture=" + arch, virtual_arch, {}};
  STRATA_CHECK(!archs.empty() && number > archs.back(), InvalidArgumentError,
               "unknown architecture '{}' for {}: this NVRTC knows {}", arch, identity, known);
  // Newer than this NVRTC: PTX of the newest architecture it knows runs there, compiled by the driver at load.
  const auto newest = fmt::format("compute_{}", archs.back());
  return {"--gpu-architecture=" + newest, true,
          fmt::format("{} does not know {}; compiled PTX for {}, which the driver compiles for the device when it "
                      "loads the module\n",
                      identity, arch, newest)};
}
#endif

/// The line that makes the compiler count the user's lines from 1 and name the user's file.
std::string line_directive(const std::string& file_name) {
  std::string quoted;
  for (char c : file_name) {
    if (c == '"' || c == '\\') quoted += '\\';
    if (c == '\n' || c == '\r') c = ' ';
    quoted += c;
  }
  return fmt::format("#line 1 \"{}\"\n", quoted);
}

std::uint64_t fnv1a(const char* text) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (; *text != '\0'; ++text) hash = (hash ^ static_cast<unsigned char>(*text)) * 1099511628211ULL;
  return hash;
}

// --- loading and launching -------------------------------------------------------------------------------------------

#if defined(STRATA_GPU_HIP)
using DriverResult = hipError_t;
constexpr DriverResult kDriverSuccess = hipSuccess;

/// HIP's module API, which the plugin links (libamdhip64 holds the runtime as well).
struct DriverApi {
  static std::string error_text(DriverResult error) {
    return fmt::format("{} ({})", hipGetErrorName(error), hipGetErrorString(error));
  }
  DriverResult load_data(ModuleHandle* module, const void* image) const { return hipModuleLoadData(module, image); }
  DriverResult unload(ModuleHandle module) const { return hipModuleUnload(module); }
  DriverResult get_function(FunctionHandle* f, ModuleHandle module, const char* name) const {
    return hipModuleGetFunction(f, module, name);
  }
  DriverResult get_global(void** address, std::size_t* bytes, ModuleHandle module, const char* name) const {
    hipDeviceptr_t ptr = nullptr;
    const DriverResult result = hipModuleGetGlobal(&ptr, bytes, module, name);
    *address = ptr;
    return result;
  }
  /// AMD GPUs need no opt-in for large shared memory (their LDS limit is the only one).
  DriverResult allow_shared(FunctionHandle, std::size_t) const { return hipSuccess; }
  DriverResult launch(FunctionHandle f, jit::Dim3 grid, jit::Dim3 block, std::size_t shared, NativeStream stream,
                      void** args) const {
    return hipModuleLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, static_cast<unsigned>(shared),
                                 static_cast<hipStream_t>(stream), args, nullptr);
  }
  static bool not_found(DriverResult error) { return error == hipErrorNotFound; }
};

void* allocate_mapped(std::size_t bytes) {
  void* ptr = nullptr;
  STRATA_CUDA_CHECK(hipHostMalloc(&ptr, bytes, hipHostMallocMapped | hipHostMallocPortable),
                    "allocating the mapped host memory of a compiled module's assert record");
  return ptr;
}
void* mapped_device_address(void* host) {
  void* device = nullptr;
  STRATA_CUDA_CHECK(hipHostGetDevicePointer(&device, host, 0), "mapping a compiled module's assert record");
  return device;
}
cudaError_t copy_to_device(void* dst, const void* src, std::size_t bytes) {
  return hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice);
}
constexpr auto kMaxSharedAttribute = hipDeviceAttributeMaxSharedMemoryPerBlock;
constexpr auto kMaxThreadsAttribute = hipDeviceAttributeMaxThreadsPerBlock;
#else
using DriverResult = CUresult;
constexpr DriverResult kDriverSuccess = CUDA_SUCCESS;

// Note [The driver API through the runtime]
// Modules and their launches are the driver API's (cuModuleLoadData, cuLaunchKernel). Linking libcuda.so.1 would
// make the plugin fail to load where the driver is missing, and with it compile(), which needs no GPU; so the
// functions are asked of the CUDA runtime (cudaGetDriverEntryPointByVersion, for the ABI of CUDA 12.0, the oldest
// driver CUDA 13's runtime runs on) at the first load(). Their contexts are the runtime's primary contexts:
// DeviceScope calls cudaSetDevice, which makes the device's primary context current on the calling thread.
struct DriverApi {
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*module_get_global)(CUdeviceptr*, std::size_t*, CUmodule, const char*) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;

  /// Asks the runtime for every entry point; throws BackendError naming the first it could not get.
  void bind() {
    const auto get = [](const char* name, auto& fn) {
      void* address = nullptr;
      cudaDriverEntryPointQueryResult status{};
      const cudaError_t error = cudaGetDriverEntryPointByVersion(name, &address, 12000, cudaEnableDefault, &status);
      if (error != cudaSuccess || status != cudaDriverEntryPointSuccess || address == nullptr) {
        (void)cudaGetLastError();
        STRATA_THROW(BackendError,
                     "the CUDA driver API's {} is unavailable ({}{}): loading a compiled kernel needs the NVIDIA "
                     "driver (libcuda.so.1)",
                     name, error != cudaSuccess ? cudaGetErrorName(error) : "",
                     status == cudaDriverEntryPointSymbolNotFound        ? "symbol not found"
                     : status == cudaDriverEntryPointVersionNotSufficent ? "driver too old"
                                                                         : "");
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)> >(address);
    };
    get("cuGetErrorName", get_error_name);
    get("cuGetErrorString", get_error_string);
    get("cuModuleLoadData", module_load_data);
    get("cuModuleUnload", module_unload);
    get("cuModuleGetFunction", module_get_function);
    get("cuModuleGetGlobal", module_get_global);
    get("cuFuncSetAttribute", func_set_attribute);
    get("cuLaunchKernel", launch_kernel);
  }

  std::string error_text(DriverResult error) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (get_error_name == nullptr || get_error_name(error, &name) != CUDA_SUCCESS) name = "CUDA_ERROR_UNKNOWN";
    if (get_error_string == nullptr || get_error_string(error, &text) != CUDA_SUCCESS) text = "unknown error";
    return fmt::format("{} ({}, {})", name, text, static_cast<int>(error));
  }
  DriverResult load_data(ModuleHandle* module, const void* image) const { return module_load_data(module, image); }
  DriverResult unload(ModuleHandle module) const { return module_unload(module); }
  DriverResult get_function(FunctionHandle* f, ModuleHandle module, const char* name) const {
    return module_get_function(f, module, name);
  }
  DriverResult get_global(void** address, std::size_t* bytes, ModuleHandle module, const char* name) const {
    CUdeviceptr ptr = 0;
    const DriverResult result = module_get_global(&ptr, bytes, module, name);
    *address = reinterpret_cast<void*>(ptr);
    return result;
  }
  /// A block may use more than 48 KiB of dynamic shared memory only when the kernel was allowed that much.
  DriverResult allow_shared(FunctionHandle f, std::size_t bytes) const {
    return func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes));
  }
  DriverResult launch(FunctionHandle f, jit::Dim3 grid, jit::Dim3 block, std::size_t shared, NativeStream stream,
                      void** args) const {
    // Strata's default stream is the legacy stream (Note [The CUDA default stream is the legacy stream]).
    const CUstream cu_stream = stream == nullptr ? CU_STREAM_LEGACY : static_cast<CUstream>(stream);
    return launch_kernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, static_cast<unsigned>(shared), cu_stream,
                         args, nullptr);
  }
  static bool not_found(DriverResult error) { return error == CUDA_ERROR_NOT_FOUND; }
};

void* allocate_mapped(std::size_t bytes) {
  void* ptr = nullptr;
  STRATA_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                    "allocating the mapped host memory of a compiled module's assert record");
  return ptr;
}
void* mapped_device_address(void* host) {
  void* device = nullptr;
  STRATA_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0), "mapping a compiled module's assert record");
  return device;
}
cudaError_t copy_to_device(void* dst, const void* src, std::size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}
constexpr auto kMaxSharedAttribute = cudaDevAttrMaxSharedMemoryPerBlockOptin;
constexpr auto kMaxThreadsAttribute = cudaDevAttrMaxThreadsPerBlock;
#endif

/// The default dynamic shared memory a kernel may use without asking (CUDA's 48 KiB).
constexpr std::size_t kDefaultSharedBytes = 48 * 1024;

/// Makes device `index` current on this thread for the scope, always through cudaSetDevice: besides selecting the
/// device, that binds its primary context to the thread, which the driver API's calls use (a thread that never
/// called the runtime has none). The previous device comes back afterwards.
class DeviceScope {
 public:
  DeviceScope(int index, const char* what) : index_(index) {
    cudaError_t err = cudaGetDevice(&previous_);
    if (err == cudaSuccess) err = cudaSetDevice(index_);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      STRATA_THROW(BackendError, "{}: selecting {} failed: {} ({})", what, gpu(index), cudaGetErrorName(err),
                   cudaGetErrorString(err));
    }
  }
  ~DeviceScope() {
    if (previous_ >= 0 && previous_ != index_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int index_;
  int previous_ = -1;
};

class GpuModule final : public jit::LoadedModule {
 public:
  GpuModule(const DriverApi& api, int index, ModuleHandle module, jit::GpuAssertRecord* record)
      : api_(api), index_(index), module_(module), record_(record) {}

  ~GpuModule() override {
    // After a trap the context is lost and these fail; the module and the memory go with the process then.
    int previous = -1;
    if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(index_) == cudaSuccess) {
      (void)api_.unload(module_);
      if (previous != index_) (void)cudaSetDevice(previous);
    }
    if (record_ != nullptr && cudaFreeHost(record_) != cudaSuccess) (void)cudaGetLastError();
    (void)cudaGetLastError();
  }

  void launch(const std::string& name, jit::Dim3 grid, jit::Dim3 block, std::size_t shared_bytes, NativeStream stream,
              void** args) override {
    const std::string what = fmt::format("launching kernel '{}' on {}", name, gpu(index_));
    const DeviceScope scope(index_, what.c_str());
    const FunctionHandle f = function(name, shared_bytes);
    const DriverResult error = api_.launch(f, grid, block, shared_bytes, stream, args);
    STRATA_CHECK(error == kDriverSuccess, BackendError,
                 "{} (grid {}x{}x{}, block {}x{}x{}, {} bytes of shared memory) failed: {}", what, grid.x, grid.y,
                 grid.z, block.x, block.y, block.z, shared_bytes, api_.error_text(error));
  }

  std::optional<jit::AssertFailure> take_assert_failure() override {
    if (record_ == nullptr) return std::nullopt;
    volatile unsigned int* state = &record_->state;
    if (*state != 2u) return std::nullopt;
    std::atomic_thread_fence(std::memory_order_acquire);
    const auto text = [](const char* chars, std::size_t capacity) {
      return std::string(chars, strnlen(chars, capacity));
    };
    jit::AssertFailure failure;
    failure.line = static_cast<int>(record_->line);
    failure.file = text(record_->file, sizeof(record_->file));
    failure.function = text(record_->function, sizeof(record_->function));
    failure.condition = text(record_->condition, sizeof(record_->condition));
    *state = 0u;
    return failure;
  }

 private:
  /// The kernel `name`, found once, and allowed `shared_bytes` of dynamic shared memory.
  FunctionHandle function(const std::string& name, std::size_t shared_bytes) {
    std::lock_guard lock(mutex_);
    auto it = functions_.find(name);
    if (it == functions_.end()) {
      FunctionHandle f{};
      const DriverResult error = api_.get_function(&f, module_, name.c_str());
      STRATA_CHECK(error == kDriverSuccess, BackendError, "launching kernel '{}' on {}: {}", name, gpu(index_),
                   DriverApi::not_found(error)
                       ? std::string("the module has no such kernel (kernels are found by their name, so declare "
                                     "them extern \"C\" __global__)")
                       : api_.error_text(error));
      it = functions_.emplace(name, Function{f, kDefaultSharedBytes}).first;
    }
    Function& entry = it->second;
    if (shared_bytes > entry.allowed_shared) {
      const DriverResult error = api_.allow_shared(entry.handle, shared_bytes);
      STRATA_CHECK(error == kDriverSuccess, BackendError,
                   "launching kernel '{}' on {}: allowing {} bytes of dynamic shared memory failed: {}", name,
                   gpu(index_), shared_bytes, api_.error_text(error));
      entry.allowed_shared = shared_bytes;
    }
    return entry.handle;
  }

  struct Function {
    FunctionHandle handle;
    std::size_t allowed_shared;
  };

  const DriverApi api_;  // a copy: a few function pointers, valid as long as the process
  int index_;
  ModuleHandle module_;
  jit::GpuAssertRecord* record_;  // mapped pinned host memory; null when the module has no assert global
  std::mutex mutex_;              // guards functions_: a module may be launched from several threads
  std::map<std::string, Function> functions_;
};

class GpuCompiler final : public jit::DeviceCompiler {
 public:
  explicit GpuCompiler(std::unique_ptr<RtcLibrary> rtc) : rtc_(std::move(rtc)) {
    int major = 0, minor = 0;
    const RtcResult result = rtc_->version(&major, &minor);
    const std::string version = result == kRtcSuccess ? fmt::format("{}.{}", major, minor) : "(unknown version)";
#if defined(STRATA_GPU_HIP)
    name_ = fmt::format("hiprtc {} (HIP {}.{}.{})", version, HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH);
#else
    name_ = fmt::format("NVRTC {}", version);
#endif
    identity_ = fmt::format("{}, Strata GPU dialect {} ({:016x})", name_, jit::kGpuDialectVersion,
                            fnv1a(jit::kGpuDialectPrelude));
  }

  std::string identity() const override { return identity_; }

  std::string device_arch(int index) const override {
    cudaDeviceProp prop{};
    STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, index), fmt::format("reading the architecture of {}", gpu(index)));
#if defined(STRATA_GPU_HIP)
    return prop.gcnArchName;
#else
    return fmt::format("sm_{}{}", prop.major, prop.minor);
#endif
  }

  jit::CompileResult compile(const jit::CompileRequest& request) const override {
    const Target target = target_for(*rtc_, name_, request.arch);
    const std::string source =
        std::string(jit::kGpuDialectPrelude) + "\n" + line_directive(request.file_name) + request.source;
    std::vector<std::string> options = {target.option, "-std=c++17"};
    options.insert(options.end(), request.options.begin(), request.options.end());
    std::vector<const char*> option_pointers;
    for (const auto& option : options) option_pointers.push_back(option.c_str());

    RtcProgram program{};
    check(rtc_->create_program(&program, source.c_str(), request.file_name.c_str(), 0, nullptr, nullptr),
          "creating the program", request);
    struct Destroy {
      const RtcLibrary& rtc;
      RtcProgram& program;
      ~Destroy() { (void)rtc.destroy_program(&program); }
    } destroy{*rtc_, program};

    const RtcResult compiled =
        rtc_->compile_program(program, static_cast<int>(option_pointers.size()), option_pointers.data());
    std::string log = target.note + program_log(program);
    if (compiled != kRtcSuccess) {
      STRATA_THROW(CompileError, "compiling {} for {} with {} failed ({}){}{}", request.file_name, request.arch, name_,
                   rtc_->get_error_string(compiled), log.empty() ? "" : ":\n", log);
    }

    jit::CompileResult result;
    result.log = std::move(log);
    std::size_t size = 0;
#if !defined(STRATA_GPU_HIP)
    if (target.ptx) {
      check(rtc_->get_ptx_size(program, &size), "reading the PTX's size", request);
      result.binary.resize(size);
      check(rtc_->get_ptx(program, result.binary.data()), "reading the PTX", request);
      // The size counts the terminating NUL, which c_str() adds again when the driver is given the text.
      while (!result.binary.empty() && result.binary.back() == '\0') result.binary.pop_back();
      return result;
    }
#endif
    check(rtc_->get_code_size(program, &size), "reading the binary's size", request);
    result.binary.resize(size);
    check(rtc_->get_code(program, result.binary.data()), "reading the binary", request);
    STRATA_CHECK(!result.binary.empty(), CompileError, "compiling {} for {} with {} gave an empty binary",
                 request.file_name, request.arch, name_);
    return result;
  }

  std::unique_ptr<jit::LoadedModule> load(int index, const std::string& binary) const override {
    const DriverApi& api = driver_api();
    const std::string what = fmt::format("loading a compiled module on {}", gpu(index));
    const DeviceScope scope(index, what.c_str());
    ModuleHandle module{};
    // c_str(): PTX must end in a NUL; a cubin or code object carries its own size.
    const DriverResult loaded = api.load_data(&module, binary.c_str());
    STRATA_CHECK(loaded == kDriverSuccess, BackendError, "{} failed: {}", what, api.error_text(loaded));
    struct Unload {
      const DriverApi& api;
      ModuleHandle module;
      bool keep = false;
      ~Unload() {
        if (!keep) (void)api.unload(module);
      }
    } unload{api, module};

    // Point the module's assert global at a record in mapped host memory (Note [The JIT's device-side assert]).
    jit::GpuAssertRecord* record = nullptr;
    void* global = nullptr;
    std::size_t global_bytes = 0;
    const DriverResult found = api.get_global(&global, &global_bytes, module, jit::kAssertRecordGlobal);
    if (found == kDriverSuccess && global_bytes == sizeof(void*)) {
      record = static_cast<jit::GpuAssertRecord*>(allocate_mapped(sizeof(jit::GpuAssertRecord)));
      std::memset(record, 0, sizeof(*record));
      void* device_record = nullptr;
      cudaError_t error = cudaSuccess;
      try {
        device_record = mapped_device_address(record);
      } catch (...) {
        (void)cudaFreeHost(record);
        throw;
      }
      error = copy_to_device(global, &device_record, sizeof(device_record));
      if (error != cudaSuccess) {
        (void)cudaFreeHost(record);
        (void)cudaGetLastError();
        STRATA_THROW(BackendError, "{}: setting its assert record failed: {} ({})", what, cudaGetErrorName(error),
                     cudaGetErrorString(error));
      }
    }
    unload.keep = true;
    return std::make_unique<GpuModule>(api, index, module, record);
  }

  std::size_t max_shared_bytes(int index) const override {
    int value = 0;
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&value, kMaxSharedAttribute, index),
                      fmt::format("reading the shared memory per block of {}", gpu(index)));
    return static_cast<std::size_t>(value);
  }

  int max_block_threads(int index) const override {
    int value = 0;
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&value, kMaxThreadsAttribute, index),
                      fmt::format("reading the threads per block of {}", gpu(index)));
    return value;
  }

 private:
  void check(RtcResult result, const char* what, const jit::CompileRequest& request) const {
    STRATA_CHECK(result == kRtcSuccess, CompileError, "compiling {} for {} with {}: {} failed ({})", request.file_name,
                 request.arch, name_, what, rtc_->get_error_string(result));
  }

  std::string program_log(RtcProgram program) const {
    std::size_t size = 0;
    if (rtc_->get_log_size(program, &size) != kRtcSuccess || size <= 1) return {};
    std::string log(size, '\0');
    if (rtc_->get_log(program, log.data()) != kRtcSuccess) return {};
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

  /// The driver's module API, bound at the first load() (Note [The driver API through the runtime]).
  const DriverApi& driver_api() const {
#if !defined(STRATA_GPU_HIP)
    std::lock_guard lock(driver_mutex_);
    if (!driver_bound_) {
      DriverApi api;
      api.bind();
      driver_ = api;
      driver_bound_ = true;
    }
#endif
    return driver_;
  }

  std::unique_ptr<RtcLibrary> rtc_;
  std::string name_;      // "NVRTC 13.0"
  std::string identity_;  // the name, the dialect's version and the prelude's hash
#if !defined(STRATA_GPU_HIP)
  mutable std::mutex driver_mutex_;  // guards binding driver_
  mutable bool driver_bound_ = false;
#endif
  mutable DriverApi driver_;
};

}  // namespace

}  // namespace strata::cuda

/// The plugin's run-time compiler (strata/jit/compiler.h), or nullptr with a one-line reason when the vendor's
/// compiler library is missing. Needs neither a GPU nor its driver. Never throws.
extern "C" STRATA_EXPORT strata::jit::DeviceCompiler* strata_create_jit_compiler(std::string* why_not) {
  std::string reason;
  try {
    if (auto rtc = strata::cuda::load_rtc(reason)) return new strata::cuda::GpuCompiler(std::move(rtc));
  } catch (const std::exception& e) {
    reason = e.what();
  }
  if (why_not != nullptr) *why_not = reason;
  return nullptr;
}
