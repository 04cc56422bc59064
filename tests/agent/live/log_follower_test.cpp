// The live log follower: only appended complete lines, through truncation, rotation, deletion, an
// agent restart, over-long lines and hostile replacements, and never reading as root.
#include "agent/live/log_follower.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::TempDir;
using testing::write_file;

// The job's owner: `nobody` when the tests run as root (so the follower really drops), else us.
Identity owner() {
  return identity_for_uid(::geteuid() == 0 ? testing::kNobody : ::geteuid());
}

void append(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) FAIL() << "open " << path << ": " << std::strerror(errno);
  const ssize_t written = ::write(fd, text.data(), text.size());
  ::close(fd);
  ASSERT_EQ(written, static_cast<ssize_t>(text.size()));
}

// What the caller of poll() scans: `length` bytes read from the fd's current offset, as scan_log
// does with max_bytes.
std::string chunk_text(const LogChunk& c) {
  std::string out(c.length, '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(c.fd, out.data() + got, out.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string text_of(const PollResult& r) {
  std::string out;
  for (const LogChunk& c : r.chunks)
    out += chunk_text(c);
  return out;
}

FollowLimits check_every_poll() {
  FollowLimits l;
  l.recheck_polls = 1;
  return l;
}

class LogFollowerTest : public ::testing::Test {
 protected:
  TempDir dir{"follow"};
  std::string log = dir / "slurm-42.out";
  FollowState fresh() const { return FollowState{.path = log}; }
};

TEST_F(LogFollowerTest, GrowthInPiecesHandsOutEachCompleteLineOnce) {
  write_file(log, "step 1\nstep 2\n");
  LogFollower f(fresh(), owner());
  PollResult r = f.poll();
  EXPECT_EQ(r.status, LogStatus::kFollowing);
  EXPECT_EQ(text_of(r), "step 1\nstep 2\n");
  EXPECT_EQ(text_of(f.poll()), "");
  append(log, "step 3\n");
  EXPECT_EQ(text_of(f.poll()), "step 3\n");
  append(log, "step 4\nstep 5\n");
  r = f.poll();
  ASSERT_EQ(r.chunks.size(), 1U);
  EXPECT_EQ(r.chunks[0].offset, 21U);
  EXPECT_FALSE(r.chunks[0].partial);
  EXPECT_EQ(text_of(r), "step 4\nstep 5\n");
  EXPECT_EQ(f.state().offset, 35U);
}

TEST_F(LogFollowerTest, PartialLastLineWaitsForItsNewline) {
  write_file(log, "step 1\nstep");
  LogFollower f(fresh(), owner());
  EXPECT_EQ(text_of(f.poll()), "step 1\n");
  append(log, " 2 loss=0.");
  EXPECT_EQ(text_of(f.poll()), "");
  append(log, "5\nstep 3");
  EXPECT_EQ(text_of(f.poll()), "step 2 loss=0.5\n");
}

TEST_F(LogFollowerTest, LogThatDoesNotExistYetIsNotYetThenFollowedFromItsStart) {
  LogFollower f(fresh(), owner());
  const PollResult r = f.poll();
  EXPECT_EQ(r.status, LogStatus::kNotYet);
  EXPECT_TRUE(r.chunks.empty());
  write_file(log, "starting\n");
  const PollResult later = f.poll();
  EXPECT_EQ(later.status, LogStatus::kFollowing);
  EXPECT_EQ(text_of(later), "starting\n");
}

TEST_F(LogFollowerTest, TruncationRestartsAtZero) {
  write_file(log, "epoch 1 step 1\nepoch 1 step 2\n");
  LogFollower f(fresh(), owner());
  (void)f.poll();
  ASSERT_EQ(::truncate(log.c_str(), 0), 0);
  append(log, "fresh\n");
  const PollResult r = f.poll();
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(text_of(r), "fresh\n");
  EXPECT_EQ(f.state().truncations, 1U);
}

TEST_F(LogFollowerTest, TruncationRegrownPastTheOffsetBetweenPollsIsStillNoticed) {
  write_file(log, "a\nb\n");
  LogFollower f(fresh(), owner());
  (void)f.poll();
  write_file(log, "rewritten after copytruncate\n");  // same inode, longer than the old offset
  const PollResult r = f.poll();
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(text_of(r), "rewritten after copytruncate\n");
}

TEST_F(LogFollowerTest, RotationByRenameDrainsTheOldFileThenFollowsTheNewOne) {
  write_file(log, "old 1\n");
  LogFollower f(fresh(), owner(), check_every_poll());
  EXPECT_EQ(text_of(f.poll()), "old 1\n");
  append(log, "old 2\n");
  ASSERT_EQ(::rename(log.c_str(), (log + ".1").c_str()), 0);
  write_file(log, "new 1\n");
  // The old file grew since the last poll: still the writer's, so its lines come first.
  PollResult r = f.poll();
  EXPECT_FALSE(r.replaced);
  EXPECT_EQ(text_of(r), "old 2\n");
  // Idle now: the path is re-checked, names another file, which is followed from byte 0.
  r = f.poll();
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(text_of(r), "new 1\n");
  append(log, "new 2\n");
  EXPECT_EQ(text_of(f.poll()), "new 2\n");
  EXPECT_EQ(f.state().replacements, 1U);
}

TEST_F(LogFollowerTest, ReplacementOverTheLogHandsOutTheOldTailAndTheNewFileInOnePoll) {
  write_file(log, "old 1\n");
  LogFollower f(fresh(), owner(), check_every_poll());
  (void)f.poll();
  append(log, "old 2\nold partial");
  write_file(dir / "next", "new 1\n");
  ASSERT_EQ(::rename((dir / "next").c_str(), log.c_str()), 0);  // the old file is unlinked
  const PollResult r = f.poll();
  EXPECT_TRUE(r.replaced);
  ASSERT_EQ(r.chunks.size(), 2U);
  EXPECT_EQ(chunk_text(r.chunks[0]), "old 2\n");
  EXPECT_EQ(chunk_text(r.chunks[1]), "new 1\n");
  EXPECT_EQ(f.state().skipped_bytes, std::string("old partial").size());
}

TEST_F(LogFollowerTest, RotationIsCheckedOnlyEveryRecheckPollsWhileIdle) {
  write_file(log, "old\n");
  FollowLimits limits;
  limits.recheck_polls = 3;
  LogFollower f(fresh(), owner(), limits);
  (void)f.poll();  // poll 1 after the open
  ASSERT_EQ(::rename(log.c_str(), (log + ".1").c_str()), 0);
  write_file(log, "new\n");
  EXPECT_FALSE(f.poll().replaced);  // 2
  const PollResult r = f.poll();    // 3
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(text_of(r), "new\n");
}

TEST_F(LogFollowerTest, DeletedLogStaysFollowedUntilRecreated) {
  write_file(log, "before\n");
  LogFollower f(fresh(), owner(), check_every_poll());
  (void)f.poll();
  ASSERT_EQ(::unlink(log.c_str()), 0);
  const PollResult gone = f.poll();
  EXPECT_EQ(gone.status, LogStatus::kFollowing);  // the writer may still hold the unlinked file
  EXPECT_FALSE(gone.replaced);
  write_file(log, "after\n");
  const PollResult r = f.poll();
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(text_of(r), "after\n");
}

TEST_F(LogFollowerTest, ResumedFromSavedStateHandsOutNoOldByte) {
  write_file(log, "step 1\nstep 2\nhalf");
  nlohmann::json saved;
  {
    LogFollower f(fresh(), owner());
    EXPECT_EQ(text_of(f.poll()), "step 1\nstep 2\n");
    saved = nlohmann::json::parse(follow_state_json(f.state()).dump());
  }
  append(log, " line\nstep 3\n");
  LogFollower resumed(follow_state_from_json(saved, "spool"), owner());
  const PollResult r = resumed.poll();
  EXPECT_FALSE(r.replaced);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(text_of(r), "half line\nstep 3\n");
}

TEST_F(LogFollowerTest, ResumedAfterTheLogWasReplacedStartsTheNewFileAtZero) {
  write_file(log, "old run\n");
  FollowState saved;
  {
    LogFollower f(fresh(), owner());
    (void)f.poll();
    saved = f.state();
  }
  write_file(dir / "next", "second run\n");
  ASSERT_EQ(::rename((dir / "next").c_str(), log.c_str()), 0);
  LogFollower resumed(saved, owner());
  const PollResult r = resumed.poll();
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(text_of(r), "second run\n");
}

TEST_F(LogFollowerTest, SavedStateRoundTripsAndBadStateIsAnInputError) {
  FollowState s{.path = log, .offset = 7, .dev = 3, .ino = 99, .size_seen = 9, .skipping = true};
  s.skipped_bytes = 5;
  const FollowState back = follow_state_from_json(follow_state_json(s), "spool");
  EXPECT_EQ(back.path, log);
  EXPECT_EQ(back.offset, 7U);
  EXPECT_EQ(back.ino, 99U);
  EXPECT_EQ(back.size_seen, 9U);
  EXPECT_TRUE(back.skipping);
  EXPECT_EQ(back.skipped_bytes, 5U);
  EXPECT_THROW(follow_state_from_json({{"offset", 1}}, "spool"), InputError);
  EXPECT_THROW(follow_state_from_json({{"path", log}, {"offset", "x"}}, "spool"), InputError);
}

TEST_F(LogFollowerTest, SymlinkToARootOnlyFileIsNeverReadAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop to nobody";
  write_file(dir / "shadow", "SECRET root:x:0\n", 0600);
  write_file(log, "step 1\n");
  LogFollower f(fresh(), owner(), check_every_poll());
  EXPECT_EQ(text_of(f.poll()), "step 1\n");
  append(log, "step 2\n");
  ASSERT_EQ(::symlink((dir / "shadow").c_str(), (dir / "link").c_str()), 0);
  ASSERT_EQ(::rename((dir / "link").c_str(), log.c_str()), 0);
  const PollResult r = f.poll();
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(r.status, LogStatus::kUnreadable);
  EXPECT_EQ(r.err, EACCES);
  EXPECT_NE(r.error.find("Permission denied"), std::string::npos) << r.error;
  EXPECT_EQ(text_of(r), "step 2\n");  // the owner's own file, drained; nothing of the target
  const PollResult again = f.poll();
  EXPECT_EQ(again.status, LogStatus::kUnreadable);
  EXPECT_TRUE(again.chunks.empty());
  // A restarted agent resuming on the symlink is refused the same way.
  LogFollower resumed(f.state(), owner());
  const PollResult r2 = resumed.poll();
  EXPECT_EQ(r2.err, EACCES);
  EXPECT_TRUE(r2.chunks.empty());
}

TEST_F(LogFollowerTest, NonRegularFileIsRefused) {
  ASSERT_EQ(::mkfifo(log.c_str(), 0666), 0);
  LogFollower f(fresh(), owner());
  const PollResult r = f.poll();  // returns at once: a FIFO would block a plain open
  EXPECT_EQ(r.status, LogStatus::kUnreadable);
  EXPECT_NE(r.error.find("FIFO"), std::string::npos) << r.error;
  EXPECT_TRUE(r.chunks.empty());
}

TEST_F(LogFollowerTest, OverLongLineIsHandedOutCutAtTheCapAndItsTailSkipped) {
  FollowLimits limits;
  limits.line_cap = 16;
  write_file(log, "ok\n" + std::string(40, 'x'));
  LogFollower f(fresh(), owner(), limits);
  PollResult r = f.poll();
  ASSERT_EQ(r.chunks.size(), 1U);
  EXPECT_TRUE(r.chunks[0].partial);
  EXPECT_EQ(text_of(r), "ok\n" + std::string(16, 'x'));
  append(log, std::string(100, 'y'));
  EXPECT_TRUE(f.poll().chunks.empty());
  append(log, "yyy\nstep 9\n");
  r = f.poll();
  ASSERT_EQ(r.chunks.size(), 1U);
  EXPECT_FALSE(r.chunks[0].partial);
  EXPECT_EQ(text_of(r), "step 9\n");
  EXPECT_EQ(f.state().partial_lines, 1U);
  EXPECT_EQ(f.state().skipped_bytes, 24U + 100U + 4U);
}

TEST_F(LogFollowerTest, BacklogIsHandedOutOverSeveralPollsAtLineBoundaries) {
  FollowLimits limits;
  limits.max_bytes_per_poll = 10;
  write_file(log, "line 1\nline 2\nline 3\n");
  LogFollower f(fresh(), owner(), limits);
  std::string seen;
  for (int i = 0; i < 5; ++i) {
    const PollResult r = f.poll();
    for (const LogChunk& c : r.chunks)
      EXPECT_LE(c.length, 10U + 10U);
    seen += text_of(r);
  }
  EXPECT_EQ(seen, "line 1\nline 2\nline 3\n");
}

long max_rss_kib() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

TEST_F(LogFollowerTest, OneGigabyteLineDoesNotGrowMemory) {
  write_file(log, "step 1\n");
  LogFollower f(fresh(), owner());
  EXPECT_EQ(text_of(f.poll()), "step 1\n");
  const long rss_before = max_rss_kib();
  const uint64_t gib = uint64_t{1} << 30;
  ASSERT_EQ(::truncate(log.c_str(), static_cast<off_t>(7 + gib)), 0);  // 1 GiB of one line, sparse
  PollResult r = f.poll();
  ASSERT_EQ(r.chunks.size(), 1U);
  EXPECT_TRUE(r.chunks[0].partial);
  EXPECT_EQ(r.chunks[0].length, uint64_t{1} << 20);
  append(log, "\nstep 2\n");
  std::string after;
  for (int i = 0; i < 40 && after.empty(); ++i)
    after = text_of(f.poll());  // at most max_bytes_per_poll examined each poll
  EXPECT_EQ(after, "step 2\n");
  EXPECT_EQ(f.state().skipped_bytes, gib - (uint64_t{1} << 20) + 1);
  EXPECT_LT(max_rss_kib() - rss_before, 8 * 1024) << "KiB grown while following a 1 GiB line";
}

}  // namespace
}  // namespace triage::agent
