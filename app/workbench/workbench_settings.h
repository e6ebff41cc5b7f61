#pragma once
// What the workbench remembers between sessions (QSettings LazyScope/workbench, i.e.
// ~/.config/LazyScope/workbench.conf): the model, corpus, backend and KV budget last used, and
// the session reports last opened or written. Window and dock layout are kept beside them.
#include <QSettings>
#include <QString>
#include <QStringList>

#include "app/workbench/command_line.h"

namespace lazyscope::workbench {

QSettings workbench_settings();

// Fills what the command line left unset from what was last used: the model and corpus when
// their files still exist, the backend, the KV budget. Options given on the command line win.
void apply_remembered_session(WorkbenchOptions* options);
// An empty model or corpus path means the default model or the bundled sample.
void remember_model(const QString& path);
void remember_corpus(const QString& path);
void remember_backend(const QString& backend);
void remember_kv_budget(qint64 bytes);

// Session reports, most recent first; files that no longer exist are left out. At most 8.
QStringList recent_reports();
void add_recent_report(const QString& path);
void clear_recent_reports();

}  // namespace lazyscope::workbench
