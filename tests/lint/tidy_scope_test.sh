#!/usr/bin/env bash
# scripts/tidy-scope decides which files CI's clang-tidy stage checks; a file it wrongly leaves out
# is a finding CI never sees. Each case builds a small repository, changes something after the
# commit named clean, and compares the files picked with the ones that must be.
#   tidy_scope_test.sh <path to scripts/tidy-scope>
set -euo pipefail
scope=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# A tree shaped like ours: .cpp files including headers from the repository root and from their
# own folder, a header including another, and a header CMake makes from a tracked .in file.
make_repo() {
  rm -rf "$work/repo"
  mkdir -p "$work/repo"/{common,agent,tests/agent,tests/fuzz}
  cd "$work/repo"
  git init -q
  git config user.email lint@test
  git config user.name lint
  printf 'Checks: bugprone-*\n' > .clang-tidy
  printf '#pragma once\n' > common/error.h
  printf '#pragma once\n#define VERSION "@V@"\n' > common/build_config.h.in
  printf '#pragma once\n#include "common/error.h"\n' > common/text.h
  printf '#include "common/text.h"\n' > common/text.cpp
  printf '#include "common/build_config.h"\n#include <string>\n' > common/version.cpp
  printf '#pragma once\n#include "common/error.h"\n' > agent/spool.h
  printf '#include "agent/spool.h"\n' > agent/spool.cpp
  printf '#include "agent/config.h"\n' > agent/config.cpp
  printf '#pragma once\n' > agent/config.h
  printf '#pragma once\n' > tests/agent/test_support.h
  printf '#include "test_support.h"\n#include "agent/config.h"\n' > tests/agent/config_test.cpp
  printf '#include "common/text.h"\n' > tests/fuzz/fuzz_text.cpp
  git add -A
  git commit -qm base
  git rev-parse HEAD > "$work/base"
}

# expect <situation> <expected files, space-separated>
expect() {
  local situation=$1 want=$2 got
  if ! got=$("$scope" "$(cat "$work/base")" 2>"$work/err" | tr '\n' ' ' | sed 's/ $//'); then
    echo "FAIL: $situation: tidy-scope failed: $(cat "$work/err")"
    failures=$((failures + 1))
  elif [[ $got != "$want" ]]; then
    echo "FAIL: $situation"
    echo "  want: $want"
    echo "  got:  $got"
    failures=$((failures + 1))
  else
    echo "ok: $situation"
  fi
}

make_repo
expect "nothing changed since the clean commit: nothing to check" ""

make_repo
echo '// edit' >> agent/config.cpp
git commit -qam edit
expect "a committed edit to one .cpp: only that file" "agent/config.cpp"

make_repo
echo '// edit' >> common/error.h
expect "an uncommitted edit to a header two includes deep: every .cpp reaching it, fuzz targets aside" \
  "agent/spool.cpp common/text.cpp"

make_repo
echo '// edit' >> tests/agent/test_support.h
expect "a test helper header included from its own folder: the tests that include it" \
  "tests/agent/config_test.cpp"

make_repo
echo '#define OTHER 1' >> common/build_config.h.in
expect "the .in file of a generated header: the files that include the generated header" \
  "common/version.cpp"

make_repo
git rm -q agent/config.cpp
printf '#include "agent/config.h"\n' > agent/settings.cpp
git add agent/settings.cpp
git commit -qm 'rename by hand'
expect "a .cpp deleted and another added: the new one, and no complaint about the old" \
  "agent/settings.cpp"

make_repo
printf 'Checks: performance-*\n' > .clang-tidy
expect "the checks themselves changed: everything" \
  "agent/config.cpp agent/spool.cpp common/text.cpp common/version.cpp tests/agent/config_test.cpp"

make_repo
echo 0123456789abcdef0123456789abcdef01234567 > "$work/base"
expect "a clean commit this clone does not have (a shallow clone): everything" \
  "agent/config.cpp agent/spool.cpp common/text.cpp common/version.cpp tests/agent/config_test.cpp"

make_repo
echo '// edit' >> common/error.h
all="agent/config.cpp agent/spool.cpp common/text.cpp common/version.cpp tests/agent/config_test.cpp"
if [[ $("$scope" --all | tr '\n' ' ' | sed 's/ $//') == "$all" ]]; then
  echo "ok: --all (scripts/lint --tidy): every .cpp but the fuzz targets, whatever changed"
else
  echo "FAIL: --all did not list every .cpp but the fuzz targets"
  failures=$((failures + 1))
fi

if ((failures > 0)); then
  echo "$failures case(s) failed"
  exit 1
fi
