// A Qt program for the sanitized build's leak check (tests/scripts/lsan_suppressions_test.sh):
// with "leak" it loses memory in a slot called from Qt's event loop, as the workbench's own code
// runs, so Qt's frames are on the allocation's stack; without it, it allocates nothing of ours.
// LeakSanitizer must report the first and not the second under scripts/lsan.supp.
#include <QCoreApplication>
#include <QTimer>
#include <cstring>

namespace {

// Stored here so the allocation escapes (the compiler keeps it), then overwritten: lost.
void* volatile g_last = nullptr;

void lose_memory() {
  for (int i = 0; i < 64; ++i) {
    char* block = new char[96];
    std::memset(block, i, 96);
    g_last = block;
  }
  g_last = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const bool leak = argc > 1 && std::strcmp(argv[1], "leak") == 0;
  QTimer::singleShot(0, &app, [leak] {
    if (leak) lose_memory();
    QCoreApplication::quit();
  });
  return app.exec();
}
