// Names from datasets stay inside the folder the user named.
#include "base/safe_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "base/error.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

std::string error_of(const fs::path& root, const std::string& name) {
  try {
    join_inside(root, name, "evidence file");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JoinInside, KeepsRelativeNamesBelowTheRoot) {
  EXPECT_EQ(join_inside("/data/evidence", "wikipedia/Paris.txt", "evidence file"),
            fs::path("/data/evidence/wikipedia/Paris.txt"));
  EXPECT_EQ(join_inside("/data/evidence", "a..b.txt", "evidence file"),
            fs::path("/data/evidence/a..b.txt"));
}

TEST(JoinInside, RefusesEscapes) {
  EXPECT_NE(error_of("/data/evidence", "../../etc/passwd").find("'..'"), std::string::npos);
  EXPECT_NE(error_of("/data/evidence", "web/../../x").find("'..'"), std::string::npos);
  EXPECT_NE(error_of("/data/evidence", "/etc/passwd").find("absolute"), std::string::npos);
  EXPECT_NE(error_of("/data/evidence", "").find("empty"), std::string::npos);
  EXPECT_NE(error_of("/data/evidence", std::string("a\0b", 3)).find("NUL"), std::string::npos);
  const std::string e = error_of("/data/evidence", "../x");
  EXPECT_NE(e.find("evidence file"), std::string::npos) << e;
  EXPECT_NE(e.find("/data/evidence"), std::string::npos) << e;
}

TEST(JoinInside, RefusesALinkLeadingOutside) {
  const fs::path dir =
      fs::temp_directory_path() / ("lazyscope-safe-path-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "root");
  std::ofstream(dir / "secret.txt") << "x";
  fs::create_symlink(dir / "secret.txt", dir / "root" / "link.txt");
  EXPECT_NE(error_of(dir / "root", "link.txt").find("link"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lazyscope
