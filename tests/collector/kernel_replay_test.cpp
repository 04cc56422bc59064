// Exactly once across restarts: stop the classifier after any record, resume a fresh one from the
// position it called safe, and the events of both runs together are exactly the events of one
// uninterrupted run (same ids, same contents; re-emitted events are byte-identical duplicates the
// agent drops by id).
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "collector/kernel_pipeline.h"
#include "common/text.h"
#include "kernel_test_util.h"

namespace triage::collector {
namespace {

std::vector<KernelRecord> fixture_records() {
  const std::string text = testing::fixture("node-mixed.dmesg");
  UniqueFd fd = testing::memory_file(text);
  auto source = open_text_source(fd.get(), "node-mixed.dmesg");
  auto records = testing::read_all(*source);
  // Record i is line i+1 (the fixture has no annotation lines).
  for (size_t i = 0; i < records.size(); ++i)
    EXPECT_EQ(records[i].seq, i + 1);
  return records;
}

std::map<std::string, std::string> by_id(const std::vector<KernelEvent>& events) {
  std::map<std::string, std::string> out;
  for (const auto& e : events) {
    const std::string j = nlohmann::json(e).dump();
    const auto [it, fresh] = out.emplace(e.id, j);
    EXPECT_TRUE(fresh || it->second == j) << "two different events with id " << e.id;
  }
  return out;
}

struct Windows {
  const char* name;
  KernelClassifierOptions options;
};

class KernelReplay : public ::testing::TestWithParam<Windows> {};

TEST_P(KernelReplay, ResumingFromTheSafePositionLosesAndDoublesNothing) {
  const KernelClassifierOptions options = GetParam().options;
  const auto records = fixture_records();
  ASSERT_GT(records.size(), 100U);

  std::vector<KernelEvent> whole;
  {
    KernelClassifier c(testing::shipped_rules(), "node003", options);
    for (const auto& r : records)
      c.feed(r, whole);
    c.flush(whole);
  }
  const auto expected = by_id(whole);
  ASSERT_EQ(expected.size(), whole.size()) << "ids must be unique in one run";
  ASSERT_GT(expected.size(), 15U);

  for (size_t stop = 1; stop < records.size(); ++stop) {
    std::vector<KernelEvent> first;
    KernelClassifier a(testing::shipped_rules(), "node003", options);
    for (size_t i = 0; i < stop; ++i)
      a.feed(records[i], first);
    const std::string pos = a.safe_resume_position();
    // Positions of text records are "text:<line>"; resume after that line.
    size_t resume = 0;
    if (!pos.empty()) {
      ASSERT_EQ(pos.rfind("text:", 0), 0U) << pos;
      resume = static_cast<size_t>(*parse_uint(pos.substr(5)));
    }
    ASSERT_LE(resume, stop) << "the safe position is ahead of what was read";

    std::vector<KernelEvent> second;
    KernelClassifier b(testing::shipped_rules(), "node003", options);
    b.set_initial_position(pos);
    for (size_t i = resume; i < records.size(); ++i)
      b.feed(records[i], second);
    b.flush(second);

    auto got = by_id(first);
    for (const auto& [id, j] : by_id(second)) {
      const auto [it, fresh] = got.emplace(id, j);
      EXPECT_TRUE(fresh || it->second == j)
          << "stop " << stop << ": event " << id << " differs after the restart";
    }
    std::string diff;
    for (const auto& [id, j] : expected) {
      const auto it = got.find(id);
      if (it == got.end()) {
        diff.append("  lost ").append(j).append("\n");
      } else if (it->second != j) {
        diff.append("  changed ").append(id).append(":\n    want ").append(j);
        diff.append("\n    got  ").append(it->second).append("\n");
      }
    }
    for (const auto& [id, j] : got) {
      if (expected.count(id) == 0) diff.append("  extra ").append(j).append("\n");
    }
    EXPECT_TRUE(diff.empty()) << "stop after record " << stop << ", resumed after " << resume
                              << ":\n"
                              << diff;
    if (!diff.empty()) break;
  }
}

// The shipped windows, and short ones under which floods are cut by their span and by the
// longest-hold limit all through the fixture.
INSTANTIATE_TEST_SUITE_P(
    Windows, KernelReplay,
    ::testing::Values(Windows{"shipped", KernelClassifierOptions{}},
                      Windows{"short", KernelClassifierOptions{500'000, 3'000'000, 2'000'000}}),
    [](const ::testing::TestParamInfo<Windows>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace triage::collector
