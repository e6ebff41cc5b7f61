#pragma once
// The one exception type every layer throws; the front ends (CLI, GUI) catch and show it.
#include <stdexcept>
#include <string>

namespace lazyscope {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lazyscope
