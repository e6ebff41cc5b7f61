#include "base/progress.h"

#include <utility>

namespace lazyscope {

ProgressFn cancellable(ProgressFn progress, const std::atomic<bool>* cancel) {
  if (!cancel) return progress;
  return [progress = std::move(progress), cancel](double fraction, std::string_view what) {
    if (cancel->load()) throw Cancelled();
    if (progress) progress(fraction, what);
  };
}

}  // namespace lazyscope
