// The two faces of the engine send the same prompt: the workbench's request for a sample
// question and its BM25 top-4 has exactly the token ids `lazyscope-cli generate` runs for the
// same request file (chat template included).
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/workbench/engine_worker.h"
#include "app/workbench/main_window.h"
#include "app/workbench/models/selected_documents_model.h"
#include "app/workbench/views/corpus_panel.h"
#include "app/workbench/views/prompt_panel.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

constexpr int kWaitMs = 180000;

// The tiny model with a ChatML chat template (as SmolLM2 has), in a directory of its own.
QString chat_model_dir(const QTemporaryDir& dir) {
  const QString out = dir.path() + QStringLiteral("/tiny-chat");
  QDir().mkpath(out);
  const QDir tiny(testing::tiny_model_dir());
  for (const QString& name : tiny.entryList(QDir::Files)) QFile::copy(tiny.filePath(name), out + '/' + name);
  QFile jinja(out + QStringLiteral("/chat_template.jinja"));
  EXPECT_TRUE(jinja.open(QIODevice::WriteOnly));
  jinja.write("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
              "{{ '<|im_start|>system\nYou are a test assistant.<|im_end|>\n' }}{% endif %}"
              "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
              "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}");
  return out;
}

std::string run_cli(const std::string& args) {
  std::string output;
  FILE* pipe = popen((std::string(LAZYSCOPE_CLI) + " " + args + " 2>&1").c_str(), "r");
  if (!pipe) return output;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), int(buffer.size()), pipe)) output += buffer.data();
  pclose(pipe);
  return output;
}

// The prompt ids `generate` runs for `request` (from its logits dump).
std::vector<int32_t> cli_prompt_ids(const QString& model, const nlohmann::json& request, const std::string& chat,
                                    const QTemporaryDir& dir) {
  const std::string request_path = (dir.path() + QStringLiteral("/request.json")).toStdString();
  const std::string dump_path = (dir.path() + QStringLiteral("/dump.json")).toStdString();
  std::ofstream(request_path) << request.dump();
  std::remove(dump_path.c_str());
  const std::string output = run_cli("generate --model " + model.toStdString() + " --request " + request_path +
                                     " --backend cpu --max-new-tokens 1 --chat " + chat + " --dump-logits " +
                                     dump_path);
  std::ifstream in(dump_path);
  EXPECT_TRUE(in.good()) << output;
  if (!in.good()) return {};
  return nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
}

class SamePrompt : public ::testing::TestWithParam<ChatMode> {};

TEST_P(SamePrompt, WorkbenchAndCliRunTheSameTokenIds) {
  QTemporaryDir dir;
  const QString model = chat_model_dir(dir);
  WorkbenchOptions options;
  options.restore_layout = false;
  options.load_default_model = false;
  options.backend = "cpu";
  MainWindow window(options);
  ASSERT_TRUE(window.openCorpus(QString()));
  QSignalSpy ready(&window, &MainWindow::modelReady);
  window.openModel(model);
  ASSERT_TRUE(ready.wait(kWaitMs)) << window.lastError().toStdString();
  ASSERT_TRUE(window.prepareDemoPrompt());
  ASSERT_EQ(window.corpusPanel()->selectedModel()->rowCount(), 4);
  window.promptPanel()->setMaxTokens(1);
  window.promptPanel()->setChatMode(GetParam());

  QSignalSpy summaries(window.worker(), &EngineWorker::runFinished);
  QSignalSpy finished(&window, &MainWindow::planFinished);
  ASSERT_TRUE(window.startRun());
  ASSERT_TRUE(finished.wait(kWaitMs));
  ASSERT_EQ(summaries.size(), 2);
  const auto gui = summaries.at(0).at(0).value<RunSummary>();
  const auto gui_materialized = summaries.at(1).at(0).value<RunSummary>();
  EXPECT_EQ(gui.prompt_ids, gui_materialized.prompt_ids);  // both columns, one prompt
  EXPECT_EQ(gui.chat_template_applied, GetParam() != ChatMode::Off);

  // The request file a user writes for the same question and passages.
  nlohmann::json request;
  request["prefix"] = window.promptPanel()->systemText().toStdString();
  request["query"] = window.promptPanel()->query().toStdString();
  for (const DocumentEntry& doc : window.corpusPanel()->selectedModel()->documents()) {
    request["documents"].push_back(doc.text.toStdString());
    request["titles"].push_back(doc.title.toStdString());
  }
  const std::vector<int32_t> cli = cli_prompt_ids(model, request, to_string(GetParam()), dir);
  ASSERT_FALSE(cli.empty());
  EXPECT_EQ(gui.prompt_ids, cli);
  EXPECT_EQ(int(gui.prompt_ids.size()), gui.prompt_tokens);
  // And the comparison can fail: the other chat setting is a different prompt.
  const std::string other = GetParam() == ChatMode::Off ? "auto" : "off";
  EXPECT_NE(gui.prompt_ids, cli_prompt_ids(model, request, other, dir));
}

INSTANTIATE_TEST_SUITE_P(ChatSettings, SamePrompt, ::testing::Values(ChatMode::Auto, ChatMode::Off),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace lazyscope::workbench
