// One planted bug per argument, for the sanitizer canary tests (tests/sanitizers/CMakeLists.txt).
// The bugs depend on argc so that no compiler can prove them and fold them away at build time.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>

namespace {

int overflow(int argc) {
  auto buf = std::make_unique<char[]>(8);
  std::memset(buf.get(), 'x', 8);
  return buf[static_cast<size_t>(argc) + 6];  // argc is 2: reads buf[8]
}

// The leak is the planted bug, so clang-tidy's leak check is right here, on purpose.
// NOLINTBEGIN(clang-analyzer-unix.Malloc)
int leak(int argc) {
  // Reachable from no root once this returns: LeakSanitizer reports it at exit.
  volatile char* lost = static_cast<char*>(std::malloc(static_cast<size_t>(argc) * 512));
  lost[0] = 'x';
  lost = nullptr;
  return 0;
}
// NOLINTEND(clang-analyzer-unix.Malloc)

int signed_overflow(int argc) {
  int big = 2147483600 + argc;
  for (int i = 0; i < 100; ++i)
    big += argc;
  return big == 0 ? 1 : 0;
}

int race(int argc) {
  int counter = 0;
  auto bump = [&counter, argc] {
    for (int i = 0; i < 1000; ++i)
      counter += argc;
  };
  std::thread a(bump);
  std::thread b(bump);
  a.join();
  b.join();
  return counter == 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    (void)std::fprintf(stderr, "usage: sanitizer_canary overflow|leak|signed-overflow|race\n");
    return 2;
  }
  const std::string_view bug = argv[1];
  if (bug == "overflow") return overflow(argc);
  if (bug == "leak") return leak(argc);
  if (bug == "signed-overflow") return signed_overflow(argc);
  if (bug == "race") return race(argc);
  (void)std::fprintf(stderr, "sanitizer_canary: unknown bug '%s'\n", argv[1]);
  return 2;
}
