// The workbench command line.
#include "app/workbench/command_line.h"

#include <gtest/gtest.h>

namespace lazyscope::workbench {
namespace {

bool parse(const QStringList& args, WorkbenchOptions* o, QString* error) {
  bool exit_now = false;
  return parse_command_line(QStringList{"lazyscope"} + args, o, error, &exit_now);
}

TEST(CommandLine, DefaultsToAutoEverything) {
  WorkbenchOptions o;
  QString error;
  ASSERT_TRUE(parse({}, &o, &error)) << error.toStdString();
  EXPECT_TRUE(o.model.isEmpty());
  EXPECT_EQ(o.backend, "auto");
  EXPECT_EQ(o.kv_budget_bytes, 0);
  EXPECT_TRUE(o.restore_layout);
  EXPECT_FALSE(o.window_size.isValid());
  EXPECT_FALSE(o.trace_gpu);
}

TEST(CommandLine, ReadsEveryOption) {
  WorkbenchOptions o;
  QString error;
  ASSERT_TRUE(parse({"--model", "/m", "--corpus", "/c.db", "--backend", "cpu", "--kv-budget",
                     "64MiB", "--demo", "--trace-gpu", "--screenshot", "/tmp/x.png"},
                    &o, &error))
      << error.toStdString();
  EXPECT_EQ(o.model, "/m");
  EXPECT_EQ(o.corpus, "/c.db");
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.kv_budget_bytes, 64 << 20);
  EXPECT_TRUE(o.demo);
  EXPECT_TRUE(o.trace_gpu);
  EXPECT_EQ(o.screenshot, "/tmp/x.png");
  EXPECT_EQ(o.window_size, QSize(1600, 1000));  // screenshots have a fixed size
  EXPECT_FALSE(o.restore_layout);
}

TEST(CommandLine, RejectsBadValues) {
  WorkbenchOptions o;
  QString error;
  EXPECT_FALSE(parse({"--backend", "tpu"}, &o, &error));
  EXPECT_TRUE(error.contains("tpu"));
  EXPECT_FALSE(parse({"--kv-budget", "lots"}, &o, &error));
  EXPECT_TRUE(error.contains("--kv-budget"));
  EXPECT_FALSE(parse({"--size", "12"}, &o, &error));
  EXPECT_FALSE(parse({"--no-such-option"}, &o, &error));
}

}  // namespace
}  // namespace lazyscope::workbench
