#pragma once
// A long test's progress on stderr, only when LAZYSCOPE_TEST_PROGRESS is set: the seconds since
// its first mark and the step reached, unbuffered, so that a run stopped under a slow tool
// (compute-sanitizer's racecheck) still shows how far it got and what each step cost.
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace lazyscope::test {

inline void progress(const char* step, int index = -1) {
  static const bool on = std::getenv("LAZYSCOPE_TEST_PROGRESS") != nullptr;
  if (!on) return;
  static const auto start = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (index >= 0) {
    std::fprintf(stderr, "[progress] %8.1f s  %s %d\n", s, step, index);
  } else {
    std::fprintf(stderr, "[progress] %8.1f s  %s\n", s, step);
  }
}

}  // namespace lazyscope::test
