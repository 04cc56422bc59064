// A flood: a GPU reporting the same correctable error 800,000 times in a row becomes one event with
// the count and the first and last time, and reading it does not make the process grow.
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "collector/kernel_pipeline.h"
#include "kernel_test_util.h"

namespace triage::collector {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Under the sanitizers (clang -O0 with ASan and coverage hooks) 800,000 lines cost minutes of CPU;
// a tenth is still a flood, and the RSS check that needs the full length runs unsanitized only.
constexpr int kLines = kSanitized ? 80000 : 800000;

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST(KernelFlood, AFloodOfHundredsOfThousandsOfRepeatsIsOneEvent) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd read_end(fds[0]);
  // dmesg output of a flood, 50 us apart (40 s in all), written while it is being read.
  std::thread writer([w = fds[1]] {
    std::string chunk;
    for (int i = 0; i < kLines; ++i) {
      const long usec = 1000L * 1000000 + static_cast<long>(i) * 50;
      char line[200];
      const int n = std::snprintf(line, sizeof line,
                                  "[%5ld.%06ld] amdgpu 0000:9d:00.0: {%d}socket: 6, die: 1, 1 new "
                                  "correctable hardware errors detected in xgmi_wafl block\n",
                                  usec / 1000000, usec % 1000000, i + 1);
      chunk.append(line, static_cast<size_t>(n));
      if (chunk.size() > 60000 || i + 1 == kLines) {
        write_all(w, chunk);
        chunk.clear();
      }
    }
    ::close(w);
  });

  auto source = open_text_source(read_end.get(), "flood");
  KernelClassifier classifier(testing::shipped_rules(), "node003");
  std::vector<KernelEvent> events;
  std::vector<KernelRecord> batch;
  long rss_early = -1;
  uint64_t fed = 0;
  bool more = true;
  while (more) {
    batch.clear();
    more = source->read(batch, 1000);
    for (const auto& r : batch) {
      classifier.feed(r, events);
      if (++fed == 100000) rss_early = rss_kib();
    }
  }
  writer.join();
  EXPECT_TRUE(events.empty()) << "the flood is still going: nothing should be out yet";
  classifier.flush(events);
  const long rss_late = rss_kib();

  ASSERT_EQ(events.size(), 1U);
  const KernelEvent& e = events[0];
  EXPECT_EQ(e.kind, "gpu-ras-correctable");
  EXPECT_EQ(e.count, static_cast<uint64_t>(kLines));
  EXPECT_EQ(e.device, "0000:9d:00.0");
  EXPECT_EQ(e.lines.size(), KernelEvent::kMaxEventLines);
  EXPECT_EQ(e.fields.at("monotonic_usec"), "1000000000");
  EXPECT_EQ(classifier.stats().records, static_cast<uint64_t>(kLines));
  EXPECT_EQ(classifier.stats().folded, static_cast<uint64_t>(kLines - 1));
  if (!kSanitized) {
    // Flat: the lines after the first 100,000 cost (next to) nothing.
    EXPECT_LT(rss_late - rss_early, 8 * 1024)
        << "RSS grew from " << rss_early << " to " << rss_late << " KiB";
  }
}

TEST(KernelFlood, FirstAndLastTimesOfAFoldedFlood) {
  std::string text;
  for (int i = 0; i < 1000; ++i) {
    text += "[Sat Nov 21 12:00:" + std::string(i < 500 ? "01" : "02") +
            " 2026] nfs: server fs01 not responding, still trying\n";
  }
  const auto events = testing::classify_text(text);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].count, 1000U);
  EXPECT_EQ(events[0].last_usec - events[0].time_usec, 1000000);
}

}  // namespace
}  // namespace triage::collector
