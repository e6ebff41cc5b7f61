// Every policy has its own colour in the plots: no two chromatic policies share a hue family.
#include <gtest/gtest.h>

#include <QColor>
#include <QString>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "app/workbench/views/cache_stats_view.h"

namespace lazyscope::workbench {
namespace {

// Hue distance in degrees on the colour wheel (0..180).
int hue_distance(const QColor& a, const QColor& b) {
  const int d = std::abs(a.hsvHue() - b.hsvHue());
  return std::min(d, 360 - d);
}

TEST(PolicyColors, ChromaticPoliciesDifferInHueAndGreysInLightness) {
  const std::vector<QString> keys = {"lazy", "materialized", "full", "none", "prefix", "positional"};
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = i + 1; j < keys.size(); ++j) {
      const QColor a = policy_color(keys[i]);
      const QColor b = policy_color(keys[j]);
      const bool a_grey = a.hsvSaturation() < 40;
      const bool b_grey = b.hsvSaturation() < 40;
      SCOPED_TRACE((keys[i] + " vs " + keys[j]).toStdString());
      if (a_grey && b_grey) {
        EXPECT_GE(std::abs(a.lightness() - b.lightness()), 60);
      } else if (!a_grey && !b_grey) {
        EXPECT_GE(hue_distance(a, b), 25);  // red (0°) and brown (11°) read as one colour
      }
    }
  }
}

}  // namespace
}  // namespace lazyscope::workbench
