// Equivalence of two runs from synthetic RunResults by the engine's rule: per-step |Δ|, the flip,
// near-tie or different, nothing compared after it.
#include <gtest/gtest.h>

#include <QApplication>
#include <QHelpEvent>
#include <QImage>
#include <QToolTip>

#include "app/workbench/models/equivalence_model.h"
#include "app/workbench/views/equivalence_view.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

RunResult run(const std::string& policy, std::vector<std::vector<float>> logits,
              std::vector<int32_t> ids) {
  RunResult r;
  r.policy = policy;
  r.backend = "cpu";  // the exact CPU's 1e-4 unless a test says otherwise
  r.step_logits = std::move(logits);
  r.generated_ids = std::move(ids);
  return r;
}

QString token(int32_t id) { return QStringLiteral("tok%1").arg(id); }

TEST(CompareRuns, IdenticalRunsSayIdentical) {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> ids;
  for (int s = 0; s < 64; ++s) {
    std::vector<float> l(10, 0.0f);
    l[size_t(s % 10)] = 5.0f;
    logits.push_back(l);
    ids.push_back(s % 10);
  }
  auto b_logits = logits;
  b_logits[7][3] += 3.1e-6f;
  const EquivalenceReport report =
      compare_runs(run("lazy", logits, ids), run("materialized", b_logits, ids), token);
  ASSERT_EQ(report.steps.size(), 64u);
  EXPECT_EQ(report.mismatches(), 0);
  EXPECT_NEAR(report.max_abs_diff(), 3.1e-6, 5e-7);
  EXPECT_EQ(report.summary(),
            QStringLiteral("lazy vs materialized: identical over 64 tokens, max |Δ| 3.1e-06 within the bound. "
                           "Rule: exact CPU (fp32): 1e-4"));
}

TEST(CompareRuns, AFlipBeyondRoundingIsDifferentAndStopsTheComparison) {
  const std::vector<std::vector<float>> a = {{1, 2, 3}, {3, 2, 1}, {0, 0, 1}};
  const std::vector<std::vector<float>> b = {{1, 2, 3}, {2, 3, 1}, {0, 0, 1}};
  const EquivalenceReport report =
      compare_runs(run("lazy", a, {2, 0, 2}), run("materialized", b, {2, 1, 2}), token);
  EXPECT_EQ(report.verdict, EquivalenceVerdict::Different);
  EXPECT_EQ(report.mismatches(), 1);
  EXPECT_EQ(report.first_mismatch(), 1);
  EXPECT_FALSE(report.same_tokens);
  ASSERT_EQ(report.steps.size(), 2u);  // step 2 follows different tokens: not compared
  EXPECT_EQ(report.uncompared_steps, 1);
  EXPECT_FLOAT_EQ(report.max_abs_diff(), 1.0f);
  EXPECT_TRUE(report.summary().contains("DIFFERENT")) << report.summary().toStdString();
  EXPECT_TRUE(report.summary().contains("until step 1")) << report.summary().toStdString();
  ASSERT_EQ(report.steps[1].top_a.size(), 3u);
  EXPECT_EQ(report.steps[1].top_a[0].text, "tok0");
  EXPECT_EQ(report.steps[1].top_b[0].text, "tok1");
}

TEST(CompareRuns, AGpuFlipWithinRoundingIsANearTie) {
  // bf16-sized noise on logits around 20: the two tokens are 0.02 apart in both runs.
  const std::vector<std::vector<float>> a = {{20.0f, 3.0f, 0.0f}, {20.00f, 19.98f, 0.0f}, {0, 0, 9}};
  const std::vector<std::vector<float>> b = {{20.0f, 3.0f, 0.0f}, {19.99f, 20.00f, 0.0f}, {9, 0, 0}};
  RunResult lazy = run("lazy", a, {0, 0, 2});
  RunResult materialized = run("materialized", b, {0, 1, 0});
  lazy.backend = materialized.backend = "cuda";
  const EquivalenceReport report = compare_runs(lazy, materialized, token);
  EXPECT_EQ(report.verdict, EquivalenceVerdict::NearTie);
  EXPECT_EQ(report.first_mismatch(), 1);
  EXPECT_EQ(report.uncompared_steps, 1);
  EXPECT_TRUE(report.summary().contains("near-tie at step 1")) << report.summary().toStdString();
  // The same logits from the fp32 CPU backend are a real difference.
  lazy.backend = materialized.backend = "cpu";
  EXPECT_EQ(compare_runs(lazy, materialized, token).verdict, EquivalenceVerdict::Different);
}

TEST(EquivalenceModel, TooltipListsTopFiveOfBoth) {
  std::vector<float> l(20);
  for (int i = 0; i < 20; ++i) l[size_t(i)] = float(i);
  EquivalenceModel m;
  m.setReport(compare_runs(run("lazy", {l}, {19}), run("materialized", {l}, {19}), token));
  ASSERT_EQ(m.rowCount(), 1);
  const QString tip = m.tooltip(0);
  for (int id = 15; id < 20; ++id) EXPECT_TRUE(tip.contains(QStringLiteral("tok%1").arg(id))) << id;
  EXPECT_FALSE(tip.contains("tok14"));
  EXPECT_TRUE(tip.contains("19.000000"));
}

TEST(EquivalenceView, StripColoursMatchDifferences) {
  EquivalenceView view;
  view.resize(800, 120);
  view.show();
  const std::vector<std::vector<float>> a = {{0, 1}, {0, 1}, {1, 0}};
  const std::vector<std::vector<float>> b = {{0, 1}, {0, 1.5f}, {0, 1}};
  view.model()->setReport(
      compare_runs(run("lazy", a, {1, 1, 0}), run("materialized", b, {1, 1, 1}), token));
  QApplication::processEvents();
  auto* strip = view.findChild<EquivalenceStrip*>();
  ASSERT_NE(strip, nullptr);
  const QImage image = strip->grab().toImage();
  // Step 0 is identical (green); step 1 differs by 0.5 (red end); step 2 flips the argmax (framed),
  // the last step compared.
  const QRect c0 = strip->cellRect(0), c1 = strip->cellRect(1), c2 = strip->cellRect(2);
  EXPECT_EQ(QColor(image.pixel(c0.center())).rgb(), difference_color(0.0).rgb());
  EXPECT_EQ(QColor(image.pixel(c1.center() + QPoint(c1.width() / 4, 0))).rgb(),
            difference_color(0.5).rgb());
  EXPECT_EQ(QColor(image.pixel(c2.topLeft() + QPoint(1, c2.height() / 3))).rgb(),
            QColor(Qt::black).rgb());
  EXPECT_EQ(strip->stepAt(c1.center()), 1);
  EXPECT_TRUE(view.summaryText().contains("DIFFERENT"));
}

TEST(DifferenceColour, GreenWhenIdenticalRedWhenLarge) {
  EXPECT_GT(difference_color(0.0).green(), difference_color(0.0).red());
  EXPECT_GT(difference_color(1.0).red(), difference_color(1.0).green());
  EXPECT_EQ(difference_color(1e-9).rgb(), difference_color(0.0).rgb());
  // Relative to the rule's bound: 1.0 under a bound of 4 is as green as 2.5e-5 under 1e-4.
  EXPECT_EQ(difference_color(1.0, 4.0).rgb(), difference_color(2.5e-5).rgb());
  EXPECT_GT(difference_color(1.0, 4.0).green(), difference_color(1.0, 4.0).red());
  EXPECT_GT(difference_color(4000.0, 4.0).red(), difference_color(4000.0, 4.0).green());
}

// Logits the size of the default model's (around 30) with the fast kernels' int8 noise.
std::vector<std::vector<float>> fast_sized(float first, float second, int steps) {
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) out.push_back({first, second, 3.0f, -8.0f});
  return out;
}

RunResult fast_cpu(RunResult r) {
  r.cpu_precision = CpuPrecision::Fast;
  return r;
}

TEST(CompareRuns, FastCpuNoiseWithinItsBoundIsIdenticalAndNamesTheRule) {
  // The same tokens, logits 1.0 apart: int8-sized, within the fast CPU's bound at a peak of 30.
  const RunResult lazy = fast_cpu(run("lazy", fast_sized(30.0f, 20.0f, 6), {0, 0, 0, 0, 0, 0}));
  const RunResult materialized = fast_cpu(run("materialized", fast_sized(29.0f, 20.0f, 6), {0, 0, 0, 0, 0, 0}));
  const EquivalenceReport report = compare_runs(lazy, materialized, token);
  EXPECT_EQ(report.verdict, EquivalenceVerdict::Identical) << report.summary().toStdString();
  EXPECT_TRUE(report.fast_cpu);
  EXPECT_TRUE(report.bound_scales);
  EXPECT_TRUE(report.summary().contains("fast CPU")) << report.summary().toStdString();
  EXPECT_TRUE(report.summary().contains("--cpu-precision exact")) << report.summary().toStdString();
  // The exact CPU's rule calls the same logits different.
  EXPECT_EQ(compare_runs(run("lazy", fast_sized(30.0f, 20.0f, 6), {0, 0, 0, 0, 0, 0}),
                         run("materialized", fast_sized(29.0f, 20.0f, 6), {0, 0, 0, 0, 0, 0}), token)
                .verdict,
            EquivalenceVerdict::Different);

  // The strip is green for it, not red; the summary is the green verdict.
  EquivalenceView view;
  view.resize(800, 120);
  view.show();
  view.model()->setReport(report);
  QApplication::processEvents();
  auto* strip = view.findChild<EquivalenceStrip*>();
  ASSERT_NE(strip, nullptr);
  const QImage image = strip->grab().toImage();
  const QColor cell(image.pixel(strip->cellRect(2).center()));
  EXPECT_EQ(cell.rgb(), difference_color(1.0, double(report.steps[2].tolerance)).rgb());
  EXPECT_GT(cell.green(), cell.red());
  EXPECT_TRUE(view.summaryText().contains("identical over 6 tokens"));
  EXPECT_FALSE(view.summaryText().contains("DIFFERENT"));
}

TEST(CompareRuns, FastCpuFlipAtANearTieIsAmberAndBeyondTheBoundIsDifferent) {
  auto a = fast_sized(30.0f, 20.0f, 3), b = fast_sized(29.2f, 20.0f, 3);
  a[1] = {29.6f, 29.3f, 3.0f, -8.0f};  // lazy picks 0 by 0.3
  b[1] = {29.1f, 29.5f, 3.0f, -8.0f};  // materialized picks 1 by 0.4
  const EquivalenceReport tie =
      compare_runs(fast_cpu(run("lazy", a, {0, 0, 0})), fast_cpu(run("materialized", b, {0, 1, 0})), token);
  EXPECT_EQ(tie.verdict, EquivalenceVerdict::NearTie) << tie.explanation.toStdString();
  EXPECT_TRUE(tie.summary().contains("near-tie at step 1")) << tie.summary().toStdString();
  EXPECT_TRUE(tie.summary().contains("fast CPU")) << tie.summary().toStdString();

  EquivalenceView view;
  view.resize(800, 120);
  view.show();
  view.model()->setReport(tie);
  QApplication::processEvents();
  auto* strip = view.findChild<EquivalenceStrip*>();
  ASSERT_NE(strip, nullptr);
  const QImage image = strip->grab().toImage();
  const QRect flip = strip->cellRect(1);
  EXPECT_EQ(QColor(image.pixel(flip.topLeft() + QPoint(2, flip.height() / 2))).rgb(), QColor(230, 140, 0).rgb());

  // Logits 20 apart (a different computation) are different under the fast bound too.
  auto c = fast_sized(30.0f, 20.0f, 3), d = fast_sized(30.0f, 20.0f, 3);
  d[1] = {30.0f, 5.0f, 3.0f, -8.0f};
  const EquivalenceReport apart =
      compare_runs(fast_cpu(run("lazy", c, {0, 0, 0})), fast_cpu(run("materialized", d, {0, 0, 0})), token);
  EXPECT_EQ(apart.verdict, EquivalenceVerdict::Different);
  EXPECT_TRUE(apart.summary().contains("DIFFERENT")) << apart.summary().toStdString();
}

}  // namespace
}  // namespace lazyscope::workbench

namespace lazyscope::workbench {
namespace {

TEST(EquivalenceView, HoverShowsTopFiveOfBothRuns) {
  EquivalenceView view;
  view.resize(800, 120);
  view.show();
  std::vector<float> a(8), b(8);
  for (int i = 0; i < 8; ++i) a[size_t(i)] = b[size_t(i)] = float(i) * 0.5f;
  b[3] += 2e-6f;
  view.model()->setReport(
      compare_runs(run("lazy", {a, a}, {7, 7}), run("materialized", {a, b}, {7, 7}), token));
  QApplication::processEvents();
  auto* strip = view.findChild<EquivalenceStrip*>();
  ASSERT_NE(strip, nullptr);
  const QPoint at = strip->cellRect(1).center();
  QHelpEvent hover(QEvent::ToolTip, at, strip->mapToGlobal(at));
  QApplication::sendEvent(strip, &hover);
  ASSERT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().contains("step 1"));
  EXPECT_TRUE(QToolTip::text().contains("tok7"));
  EXPECT_TRUE(QToolTip::text().contains("materialized"));
  for (QWidget* w : QApplication::topLevelWidgets())
    if (w->inherits("QTipLabel")) w->grab().save(testing::artifact_path("equivalence_tooltip.png"));
  QToolTip::hideText();
}

}  // namespace
}  // namespace lazyscope::workbench
