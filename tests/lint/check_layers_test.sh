#!/usr/bin/env bash
# scripts/check-layers keeps the includes pointing down, across the floors (common < collector <
# analyzer < agent, spank apart) and across the agent's rooms; an upward include it lets through
# is a knot in the architecture nobody sees until it is hard to undo. Each case builds a small tree
# shaped like ours, adds one include, and checks the verdict and the line that names it.
#   check_layers_test.sh <path to scripts/check-layers>
set -euo pipefail
check=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# A tree where every include points down: a common header, a collector file on it, agent rooms
# using the rooms below them and the floors, the frame on top, a test including anything, and the
# plugin on its own.
make_tree() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree"/{common,collector,analyzer,agent/{base,node,live,server},spank,tests/agent}
  cd "$work/tree"
  printf '#pragma once\n' > common/error.h
  printf '#pragma once\n#define V "@V@"\n' > common/build_config.h.in
  printf '#pragma once\n#include "common/error.h"\n#include "common/build_config.h"\n' > collector/sample.h
  printf '#pragma once\n#include "collector/sample.h"\n' > analyzer/verdict.h
  printf '#pragma once\n' > agent/base/config.h
  printf '#pragma once\n#include "agent/base/config.h"\n#include "collector/sample.h"\n' > agent/node/spool.h
  printf '#include "agent/node/spool.h"\n#include <string>\n#include "nlohmann/json.hpp"\n' > agent/node/spool.cpp
  printf '#pragma once\n#include "agent/node/spool.h"\n#include "analyzer/verdict.h"\n' > agent/live/live_job.h
  printf '#pragma once\n#include "agent/live/live_job.h"\n' > agent/server/socket_api.h
  printf '#include "agent/server/socket_api.h"\n' > agent/agent.cpp
  printf '#include "agent/agent.cpp"\n#include "agent/server/socket_api.h"\n' > tests/agent/socket_test.cpp
  printf '#pragma once\n' > spank/slice.h
  printf '#include "spank/slice.h"\n' > spank/plugin.cpp
}

# expect <situation> <exit status> [<the one line it must print>]
expect() {
  local situation=$1 want_rc=$2 want_line=${3:-} rc=0
  "$check" "$work/tree" >"$work/out" 2>"$work/err" || rc=$?
  if ((rc != want_rc)); then
    echo "FAIL: $situation: exit $rc, want $want_rc; it printed:"
    sed 's/^/  /' "$work/out" "$work/err"
    failures=$((failures + 1))
  elif [[ -n $want_line && $(cat "$work/out") != "$want_line" ]]; then
    echo "FAIL: $situation"
    echo "  want: $want_line"
    echo "  got:  $(cat "$work/out")"
    failures=$((failures + 1))
  else
    echo "ok: $situation"
  fi
}

make_tree
expect "every include points down; tests, system and third-party headers are not arrows" 0

make_tree
printf '#pragma once\n#include "agent/base/config.h"\n#include "agent/live/live_job.h"\n' > agent/node/feeds.h
expect "a room includes a room above it: named with its file, line and what it may include" 1 \
  "agent/node/feeds.h:3: agent/node/ includes agent/live/live_job.h (agent/node/ may include only: agent/node/, agent/base/, analyzer/, collector/, common/)"

make_tree
printf '#pragma once\n#include "../server/socket_api.h"\n' > agent/live/live_decision.h
expect "an upward include written relative to the including file" 1 \
  "agent/live/live_decision.h:2: agent/live/ includes agent/server/socket_api.h (agent/live/ may include only: agent/live/, agent/requeue/, agent/job_end/, agent/health/, agent/slurm/, agent/history/, agent/net/, agent/node/, agent/base/, analyzer/, collector/, common/)"

make_tree
printf '#pragma once\n#include "agent/agent.h"\n' > agent/base/event_loop.h
printf '#pragma once\n' > agent/agent.h
expect "a room includes the frame (agent/'s own files)" 1 \
  "agent/base/event_loop.h:2: agent/base/ includes agent/agent.h (agent/base/ may include only: agent/base/, analyzer/, collector/, common/)"

make_tree
printf '#pragma once\n#include "analyzer/verdict.h"\n' > collector/judge.h
expect "a floor includes a floor above it" 1 \
  "collector/judge.h:2: collector/ includes analyzer/verdict.h (collector/ may include only: collector/, common/)"

make_tree
printf '#include "agent/node/spool.h"\n' > analyzer/report.cpp
expect "the analyzer includes the agent" 1 \
  "analyzer/report.cpp:1: analyzer/ includes agent/node/spool.h (analyzer/ may include only: analyzer/, collector/, common/)"

make_tree
printf '#include "spank/slice.h"\n#include "common/error.h"\n' > spank/agent_link.cpp
expect "the plugin includes common/: it stands apart" 1 \
  "spank/agent_link.cpp:2: spank/ includes common/error.h (spank/ may include only: spank/)"

make_tree
printf '#pragma once\n#include "spank/slice.h"\n' > common/plugin_view.h
expect "a floor includes the plugin" 1 \
  "common/plugin_view.h:2: common/ includes spank/slice.h (common/ may include only: common/)"

make_tree
printf '#pragma once\n#include "tests/agent/fixture.h"\n' > agent/node/journal.h
printf '#pragma once\n' > tests/agent/fixture.h
expect "product code includes a test header" 1 \
  "agent/node/journal.h:2: agent/node/ includes tests/agent/fixture.h (agent/node/ may include only: agent/node/, agent/base/, analyzer/, collector/, common/)"

make_tree
mkdir -p agent/storage
printf '#pragma once\n' > agent/storage/blob.h
expect "a folder under agent/ that is not in the room order: placed in it on purpose or not at all" 1 \
  "agent/storage/blob.h:1: agent/storage/ is not a room of the agent's order (scripts/check-layers AGENT_ROOMS: agent/, agent/server/, agent/live/, agent/requeue/, agent/job_end/, agent/health/, agent/slurm/, agent/history/, agent/net/, agent/node/, agent/base/)"

# docs/architecture.md states the order for readers; write_doc <rooms, top down> gives it a list.
write_doc() {
  mkdir -p docs
  { printf '# Architecture\n\n## The agent'"'"'s rooms\n\nTop to bottom.\n\n'
    for room in "$@"; do printf -- '- `%s`: what lives there.\n' "$room"; done
    printf '\n## Pieces\n\n- `agent/job_end/`: not a room list any more.\n'; } > docs/architecture.md
}
rooms=(agent/ agent/server/ agent/live/ agent/requeue/ agent/job_end/ agent/health/ agent/slurm/
       agent/history/ agent/net/ agent/node/ agent/base/)

make_tree
write_doc "${rooms[@]}"
expect "docs/architecture.md lists the rooms in the check's order" 0

make_tree
write_doc agent/ agent/server/ agent/job_end/ agent/live/ agent/requeue/ agent/health/ agent/slurm/ \
  agent/history/ agent/net/ agent/node/ agent/base/
expect "docs/architecture.md lists the rooms in another order than the check holds the includes to" 1 \
  "docs/architecture.md:3: the rooms are listed as agent/, agent/server/, agent/job_end/, agent/live/, agent/requeue/, agent/health/, agent/slurm/, agent/history/, agent/net/, agent/node/, agent/base/; scripts/check-layers orders them agent/, agent/server/, agent/live/, agent/requeue/, agent/job_end/, agent/health/, agent/slurm/, agent/history/, agent/net/, agent/node/, agent/base/"

if ((failures > 0)); then
  echo "$failures case(s) failed"
  exit 1
fi
