#pragma once
// Saved files are either the old version or the new one, never a mix, whatever moment the writer
// is killed at: the new content goes to a temporary sibling, which is fsync'd, renamed over the
// target, and the folder fsync'd so the rename itself survives a power cut.
#include <filesystem>
#include <string>
#include <string_view>

namespace lazyscope {

// A temporary sibling ".NAME.tmp-PID-N" of `target` for writers that need a path of their own
// (SQLite). commit() makes it the target; the destructor removes it if commit() never ran.
// Construction also removes the temporaries that killed writers of the same target left behind.
class AtomicFile {
 public:
  // `what` names the file's kind in errors ("session report").
  AtomicFile(std::filesystem::path target, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& temp_path() const { return temp_; }
  const std::filesystem::path& target() const { return target_; }
  // fsync the temporary, rename it over the target, fsync the folder. Throws Error naming the
  // target; the temporary is gone either way.
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::string what_;
  bool committed_ = false;
};

// Writes `contents` to `target` through an AtomicFile. Throws Error naming the file.
void write_file_atomically(const std::filesystem::path& target, std::string_view contents,
                           const std::string& what);

// A fresh name ".NAME.tmp-PID-N" beside `target`, unique within this process, for a file or a
// folder written first and renamed over the target when complete.
std::filesystem::path temporary_sibling(const std::filesystem::path& target);

// Removes the ".NAME.tmp-PID-N" siblings of `target` (files or folders) whose writer process no
// longer runs. Returns how many it removed.
int remove_orphaned_temporaries(const std::filesystem::path& target);

// fsync a file or a folder by path; false when it cannot be opened or synced.
bool fsync_path(const std::filesystem::path& path);

}  // namespace lazyscope
