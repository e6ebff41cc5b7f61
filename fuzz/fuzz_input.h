#pragma once
// Helpers shared by the fuzz targets: loaders that read files get the input through a scratch
// file of this process (on tmpfs when there is one), and expected errors are swallowed so that
// only crashes, hangs, leaks and sanitizer findings stop the fuzzer.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace lazyscope::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("lazyscope-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes the input to scratch_dir()/name and returns the path. Each name's file stays open for
// the process and is overwritten in place and cut to the input's size: creating and truncating it
// for every input freed and faulted in its tmpfs pages again, and its folders' stat calls were a
// few per cent of a run. The loaders open the path themselves and see exactly the input's bytes.
inline std::filesystem::path write_scratch(const std::string& name, const uint8_t* data,
                                           std::size_t size) {
  static std::map<std::string, int> files;
  const std::filesystem::path p = scratch_dir() / name;
  auto it = files.find(name);
  if (it == files.end()) {
    std::filesystem::create_directories(p.parent_path());
    const int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) std::abort();
    it = files.emplace(name, fd).first;
  }
  const int fd = it->second;
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, off_t(done));
    if (n <= 0) std::abort();
    done += std::size_t(n);
  }
  if (::ftruncate(fd, off_t(size)) != 0) std::abort();
  return p;
}

inline std::filesystem::path write_scratch(const std::string& name, const std::string& text) {
  return write_scratch(name, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

}  // namespace lazyscope::fuzz
