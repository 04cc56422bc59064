// Two bugs planted on purpose, never compiled: every clang-tidy run of scripts/lint checks this
// file first and stops unless both are reported. A tidy stage that quietly checks nothing (a lost
// compile database, a broken clang-tidy, an exit status lost in a pipe) then fails CI instead of
// passing it. The extension keeps it out of the tree-wide file lists.
#include <string>
#include <utility>

std::size_t moved_then_read(std::string s) {
  std::string taken = std::move(s);
  return taken.size() + s.size();  // bugprone-use-after-move
}

int null_read(bool set) {
  int value = 1;
  int* p = set ? &value : nullptr;
  return *p;  // clang-analyzer-core.NullDereference
}
