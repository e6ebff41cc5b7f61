// cancellable(): reports pass through until the flag is set, then the next report throws.
#include "base/progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lazyscope {
namespace {

TEST(Cancellable, ForwardsReportsUntilTheFlagIsSetThenThrows) {
  std::atomic<bool> cancel{false};
  std::vector<double> seen;
  ProgressFn progress = cancellable([&](double f, std::string_view) { seen.push_back(f); }, &cancel);
  progress(0.25, "first");
  progress(0.5, "second");
  cancel.store(true);
  EXPECT_THROW(progress(0.75, "third"), Cancelled);
  EXPECT_EQ(seen, (std::vector<double>{0.25, 0.5}));  // the report after the press is not shown
}

TEST(Cancellable, WorksWithoutACallbackAndWithoutAFlag) {
  std::atomic<bool> cancel{true};
  EXPECT_THROW(cancellable({}, &cancel)(0.1, "x"), Cancelled);
  int calls = 0;
  ProgressFn plain = cancellable([&](double, std::string_view) { ++calls; }, nullptr);
  plain(0.1, "x");
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(cancellable({}, nullptr));  // nothing to report, nothing to check
}

TEST(Cancellable, IsAnErrorThatSaysCancelled) {
  try {
    throw Cancelled();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cancelled");
  }
}

}  // namespace
}  // namespace lazyscope
