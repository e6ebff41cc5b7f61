#include "base/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

std::string temp_prefix(const fs::path& target) {
  return "." + target.filename().string() + ".tmp-";
}

fs::path folder_of(const fs::path& target) {
  const fs::path parent = target.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

bool fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

int remove_orphaned_temporaries(const fs::path& target) {
  const std::string prefix = temp_prefix(target);
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(folder_of(target), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // PID-N
    char* after = nullptr;
    const long pid = std::strtol(rest.c_str(), &after, 10);
    if (after == rest.c_str() || *after != '-' || process_alive(pid)) continue;
    std::error_code remove_error;
    if (fs::remove_all(it->path(), remove_error) > 0) ++removed;
  }
  return removed;
}

fs::path temporary_sibling(const fs::path& target) {
  static std::atomic<int> counter{0};
  return folder_of(target) /
         (temp_prefix(target) + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

AtomicFile::AtomicFile(fs::path target, std::string what)
    : target_(std::move(target)), what_(std::move(what)) {
  remove_orphaned_temporaries(target_);
  temp_ = temporary_sibling(target_);
  std::error_code ec;
  fs::remove(temp_, ec);
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  std::error_code ec;
  fs::remove(temp_, ec);
}

void AtomicFile::commit() {
  std::error_code ec;
  if (!fsync_path(temp_)) {
    fs::remove(temp_, ec);
    throw Error(target_.string() + ": cannot write the " + what_ + " (sync of " + temp_.string() +
                " failed: " + std::strerror(errno) + ")");
  }
  fs::rename(temp_, target_, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp_, ignored);
    throw Error(target_.string() + ": cannot write the " + what_ + ": " + ec.message());
  }
  committed_ = true;
  fsync_path(folder_of(target_));
}

void write_file_atomically(const fs::path& target, std::string_view contents,
                           const std::string& what) {
  AtomicFile file(target, what);
  const int fd = ::open(file.temp_path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(target.string() + ": cannot write the " + what + ": " + std::strerror(errno));
  }
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      throw Error(target.string() + ": cannot write the " + what + ": " + std::strerror(saved) +
                  " (disk full?)");
    }
    done += std::size_t(n);
  }
  if (::close(fd) != 0) {
    throw Error(target.string() + ": cannot write the " + what + ": " + std::strerror(errno));
  }
  file.commit();
}

}  // namespace lazyscope
