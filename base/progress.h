#pragma once
// Long work reports progress through this callback; front ends draw bars from it. A front end
// with a Cancel button wraps its callback in cancellable(): the next report after the press
// throws Cancelled, and the work unwinds as it would on any error (loaders and imports leave no
// half-written result behind).
#include <atomic>
#include <functional>
#include <string_view>

#include "base/error.h"

namespace lazyscope {

// fraction in [0, 1]; `what` names the current stage ("loading model.safetensors").
using ProgressFn = std::function<void(double fraction, std::string_view what)>;

// The user asked to stop; not a failure, so front ends say "cancelled" rather than show an error.
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled") {}
};

// `progress` (may be empty) behind a check of `*cancel` (may be null: never cancelled). The
// flag is read before each report; once it is true the report throws Cancelled instead.
ProgressFn cancellable(ProgressFn progress, const std::atomic<bool>* cancel);

}  // namespace lazyscope
