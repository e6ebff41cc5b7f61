#include "app/cli/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace lazyscope::cli {

ProgressBar::ProgressBar() : tty_(isatty(fileno(stderr)) != 0), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(double fraction, std::string_view what) {
  if (!tty_) return;
  fraction = std::clamp(fraction, 0.0, 1.0);
  int permille = int(fraction * 1000);
  if (permille == last_permille_ && what == last_what_) return;
  last_permille_ = permille;
  last_what_ = std::string(what);
  constexpr int kWidth = 30;
  int filled = int(fraction * kWidth);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %5.1f%% %6.1fs %-40.40s", bar.c_str(), fraction * 100.0, seconds,
               last_what_.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

ProgressFn ProgressBar::callback() {
  return [this](double f, std::string_view what) { update(f, what); };
}

}  // namespace lazyscope::cli
