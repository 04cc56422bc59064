#include "agent/base/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace triage::agent {
namespace {

// Agent::call() asks on_loop_thread() from any thread while the loop thread may be starting run():
// under ThreadSanitizer (scripts/test) this test is what proves the two do not race.
TEST(EventLoop, OtherThreadsAskWhetherTheyAreTheLoopWhileItStarts) {
  EventLoop loop;
  std::atomic<bool> asking{true};
  std::atomic<int> claimed_by_outsider{0};
  std::thread outsider([&] {
    while (asking) {
      if (loop.on_loop_thread()) ++claimed_by_outsider;
    }
  });
  std::thread runner([&] { loop.run(); });

  std::promise<bool> inside;
  ASSERT_TRUE(loop.post([&] { inside.set_value(loop.on_loop_thread()); }));
  EXPECT_TRUE(inside.get_future().get());
  EXPECT_FALSE(loop.on_loop_thread());

  loop.stop();
  runner.join();
  asking = false;
  outsider.join();
  EXPECT_EQ(claimed_by_outsider, 0);
}

}  // namespace
}  // namespace triage::agent
