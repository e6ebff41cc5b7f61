#pragma once
// Shared helpers for the workbench tests: the offscreen QApplication and a tiny model on disk.
#include <QString>

namespace lazyscope::workbench::testing {

// Directory of a generated tiny model, written once per test process.
QString tiny_model_dir();
// Where tests put pictures for people to look at (next to the test binary).
QString artifact_path(const QString& file_name);

}  // namespace lazyscope::workbench::testing
