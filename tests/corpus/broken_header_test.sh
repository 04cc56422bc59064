#!/usr/bin/env bash
# A corpus file whose header is broken fails the accuracy run, naming the file and the line.
set -euo pipefail
python=$1 accuracy=$2 binary=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/log/x"
expect_error() {  # FILE-CONTENT EXPECTED-MESSAGE
  printf '%s' "$1" >"$dir/log/x/case.log"
  local rc=0 err
  err=$("$python" "$accuracy" --binary "$binary" --corpus "$dir" 2>&1 >/dev/null) || rc=$?
  if [[ $rc -ne 2 || $err != *"$2"* ]]; then
    echo "expected exit 2 and '$2', got exit $rc: $err" >&2
    exit 1
  fi
}
good='source: https://example.org/x
kind: log
expect-class: oom-gpu
expect-blame: user-config
note: n
--- excerpt ---
torch.OutOfMemoryError: CUDA out of memory.
'
expect_error "${good/expect-class: oom-gpu/expect-class: no-such-class}" "log/x/case.log:3: unknown class 'no-such-class'"
expect_error "${good/expect-blame: user-config/expect-blame: someone}" "log/x/case.log:4: unknown blame 'someone'"
expect_error "${good/note: n/notes n}" "log/x/case.log:5: expected 'key: value'"
expect_error "${good/--- excerpt ---/}" "log/x/case.log:"
expect_error "${good/kind: log/kind: log
kind: log}" "log/x/case.log:3: 'kind' given twice"
expect_error "${good/source: https:\/\/example.org\/x/source: somewhere}" "log/x/case.log:1: source must be a URL"
# The same file, mended, is measured.
printf '%s' "$good" >"$dir/log/x/case.log"
"$python" "$accuracy" --binary "$binary" --corpus "$dir" --json | grep -q '"excerpts": 1'
echo "ok"
