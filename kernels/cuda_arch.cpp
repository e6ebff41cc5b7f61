#include "kernels/cuda_arch.h"

#include <algorithm>
#include <string>

namespace lazyscope::cuda {
namespace {

struct BuiltArch {
  int number = 0;
  bool sass = false, ptx = false;
  bool arch_specific = false;  // "90a": that exact capability only
};

BuiltArch parse(const std::string& entry) {
  BuiltArch arch;
  std::size_t digits = 0;
  while (digits < entry.size() && entry[digits] >= '0' && entry[digits] <= '9') ++digits;
  if (digits == 0) return arch;
  arch.number = std::stoi(entry.substr(0, digits));
  std::string suffix = entry.substr(digits);
  if (!suffix.empty() && (suffix.back() == 'a' || suffix.back() == 'f')) {
    arch.arch_specific = suffix.back() == 'a';
    suffix.pop_back();  // 90a: same rules
  }
  if (suffix.size() > 1 && (suffix[0] == 'a' || suffix[0] == 'f')) {
    arch.arch_specific = suffix[0] == 'a';
    suffix.erase(0, 1);
  }
  arch.sass = suffix.empty() || suffix == "-real";
  arch.ptx = suffix.empty() || suffix == "-virtual";
  return arch;
}

}  // namespace

KernelPath kernel_path_for(ComputeCapability device, const std::vector<std::string>& built) {
  KernelPath path;
  const int number = device.number();
  if (number < kMinimumCapability.number()) return path;
  // SASS runs on its own major version at an equal or higher minor; PTX on anything newer.
  int best_ptx = 0;
  for (const std::string& entry : built) {
    const BuiltArch arch = parse(entry);
    if (arch.number == 0) continue;
    if (arch.sass && arch.number / 10 == device.major && arch.number <= number &&
        arch.number > path.sass_arch) {
      path.sass_arch = arch.number;
    }
    if (arch.ptx && arch.number <= number && arch.number > best_ptx) best_ptx = arch.number;
  }
  if (path.sass_arch == 0) path.ptx_arch = best_ptx;
  path.supported = path.sass_arch != 0 || path.ptx_arch != 0;
  const int code = path.sass_arch != 0 ? path.sass_arch : path.ptx_arch;
  // The device code holds griddepcontrol / bulk prefetches only when compiled for 9.0 or newer.
  path.programmatic_launch = path.supported && number >= 90 && code >= 90;
  path.bulk_prefetch = path.programmatic_launch;
  for (const std::string& entry : built) {
    const BuiltArch arch = parse(entry);
    if (arch.sass && arch.arch_specific && arch.number == 90 && number == 90) path.wgmma = true;
  }
  return path;
}

std::vector<std::string> built_cuda_archs() {
  std::vector<std::string> archs;
#ifdef LAZYSCOPE_CUDA_ARCHS_BUILT
  const std::string list = LAZYSCOPE_CUDA_ARCHS_BUILT;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    if (end > start) archs.push_back(list.substr(start, end - start));
    start = end + 1;
  }
#endif
  return archs;
}

std::string unsupported_gpu_message(int index, std::string_view name, ComputeCapability device,
                                    const std::vector<std::string>& built) {
  std::string archs;
  for (const std::string& arch : built) archs += (archs.empty() ? "" : ", ") + arch;
  const std::string gpu = "CUDA device " + std::to_string(index) + " (" + std::string(name) +
                          ", compute capability " + std::to_string(device.major) + "." +
                          std::to_string(device.minor) + ")";
  if (device.number() < kMinimumCapability.number()) {
    return gpu + " is older than the CUDA kernels' minimum, compute capability " +
           std::to_string(kMinimumCapability.major) + "." +
           std::to_string(kMinimumCapability.minor) + " (bf16 tensor-core MMA, cp.async)";
  }
  return gpu + " has no kernels in this build (built for " + (archs.empty() ? "nothing" : archs) +
         "); configure with -DLAZYSCOPE_CUDA_ARCHS including " + std::to_string(device.number()) +
         "-real";
}

}  // namespace lazyscope::cuda
