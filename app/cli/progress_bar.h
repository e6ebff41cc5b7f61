#pragma once
// A terminal progress bar on stderr, drawn from ProgressFn callbacks; silent when not a TTY.
#include <chrono>
#include <string>

#include "base/progress.h"

namespace lazyscope::cli {

class ProgressBar {
 public:
  ProgressBar();
  ~ProgressBar();
  void update(double fraction, std::string_view what);
  void finish();
  ProgressFn callback();

 private:
  bool tty_ = false;
  bool drawn_ = false;
  int last_permille_ = -1;
  std::string last_what_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lazyscope::cli
