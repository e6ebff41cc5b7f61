#include "kernels/kernel_names.h"

#include <cxxabi.h>

#include <cstdlib>

namespace lazyscope {

KernelNames kernel_names(const std::string& mangled) {
  KernelNames names;
  int status = 0;
  char* demangled = mangled.empty() ? nullptr : abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  names.demangled = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  if (names.demangled.empty()) names.demangled = "kernel";
  std::string name = names.demangled;
  // Drop the parameter list (the last top-level parenthesis group), then the return type and scopes.
  int depth = 0;
  for (std::size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) {
      if (i > 0) name.resize(i);
      break;
    }
  }
  std::size_t angle = 0, cut = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++angle;
    if (name[i] == '>' && angle > 0) --angle;
    if (angle == 0 && (name[i] == ' ' || name.compare(i, 2, "::") == 0)) cut = name[i] == ' ' ? i + 1 : i + 2;
  }
  names.display = name.substr(cut);
  names.base = names.display.substr(0, names.display.find('<'));
  if (names.base.empty()) names.base = names.display;
  return names;
}

}  // namespace lazyscope
