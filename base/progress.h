#pragma once
// Long work reports progress through this callback; front ends draw bars from it.
#include <functional>
#include <string_view>

namespace lazyscope {

// fraction in [0, 1]; `what` names the current stage ("loading model.safetensors").
using ProgressFn = std::function<void(double fraction, std::string_view what)>;

}  // namespace lazyscope
