#pragma once
// Wraps a text request in the model's chat template (system + documents + question), keeping
// every document its own segment so block-mode caching still sees each passage.
#include <string>

#include "engine/runtime/request.h"

namespace lazyscope {

// Text requests only (an id request is returned unchanged). An empty template leaves the
// request as it is.
Request apply_chat_template(const Request& request, const std::string& template_text);

}  // namespace lazyscope
