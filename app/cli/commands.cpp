#include "app/cli/commands.h"

namespace lazyscope::cli {

void add_all_commands(CLI::App& app) {
  add_make_model_command(app);
  add_models_command(app);
  add_tokenize_commands(app);
  add_generate_command(app);
  add_cache_demo_command(app);
  add_corpus_command(app);
  add_session_command(app);
  add_eval_command(app);
  add_workload_command(app);
  add_overhead_command(app);
}

}  // namespace lazyscope::cli
