// The collectors behind the preflight's GPU facts, on fixture trees: the processes of Slurm jobs
// holding a GPU device file (collector/proc/gpu_holders.h) and the GPUs present
// (collector/sysfs/gpu_inventory.h).
#include "collector/proc/gpu_holders.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "collector/sysfs/gpu_inventory.h"
#include "tests/agent/test_support.h"

namespace triage::collector {
namespace {

using agent::testing::TempDir;
using agent::testing::write_file;
using agent::testing::write_proc_tree;

// /proc/<pid>/fd/<n> -> target, as the kernel shows a process's open files.
void open_files(const std::string& proc, int64_t pid, const std::vector<std::string>& targets) {
  const std::string fd = proc + "/" + std::to_string(pid) + "/fd";
  ::mkdir(fd.c_str(), 0755);
  for (size_t i = 0; i < targets.size(); ++i) {
    ASSERT_EQ(::symlink(targets[i].c_str(), (fd + "/" + std::to_string(i)).c_str()), 0);
  }
}

GpuHolderScanner::Options options(const std::string& proc, const std::string& dev) {
  GpuHolderScanner::Options o;
  o.proc_root = proc;
  o.dev_dir = dev;
  o.read_timeout = std::chrono::milliseconds(200);
  o.max_stuck = 2;
  return o;
}

TEST(GpuHolders, TheGpuDeviceFilesAreNvidiaNRenderNodesAndKfd) {
  EXPECT_EQ(gpu_device_of_target("/dev/nvidia1", "/dev"), "/dev/nvidia1");
  EXPECT_EQ(gpu_device_of_target("/dev/dri/renderD129", "/dev"), "/dev/dri/renderD129");
  EXPECT_EQ(gpu_device_of_target("/dev/kfd", "/dev/"), "/dev/kfd");
  EXPECT_EQ(gpu_device_of_target("/var/tmp/dev/node1/nvidia0", "/var/tmp/dev/node1"),
            "/dev/nvidia0")
      << "a stand-in for /dev names its files as /dev would";
  EXPECT_EQ(gpu_device_of_target("/dev/nvidiactl", "/dev"), "");
  EXPECT_EQ(gpu_device_of_target("/dev/nvidia-uvm", "/dev"), "");
  EXPECT_EQ(gpu_device_of_target("/dev/nvidia0 (deleted)", "/dev"), "");
  EXPECT_EQ(gpu_device_of_target("/dev/dri/card0", "/dev"), "");
  EXPECT_EQ(gpu_device_of_target("/devices/nvidia0", "/dev"), "");
  EXPECT_EQ(gpu_device_of_target("/home/alice/nvidia0", "/dev"), "");
  EXPECT_EQ(gpu_device_of_target("socket:[12345]", "/dev"), "");
}

TEST(GpuHolders, AProcessOfAJobHoldingAGpuIsFoundWithItsJobAndDevices) {
  TempDir dir("gpu-holders");
  const std::string proc = dir / "proc";
  write_proc_tree(
      proc, {
                {4711, "python3", 'S', "0", "0::/system.slice/slurmstepd.scope/job_41/step_0\n"},
                {4712, "bash", 'S', "0", "0::/system.slice/slurmstepd.scope/job_41/step_0\n"},
                {5000, "nvidia-smi", 'S', "0", "0::/user.slice/user-0.slice\n"},
                {6000, "train", 'S', "0", "12:freezer:/slurm/uid_1000/job_42/step_0\n"},
            });
  open_files(proc, 4711,
             {"/dev/null", "/dev/nvidiactl", "/dev/nvidia1", "/dev/nvidia-uvm", "/dev/nvidia1",
              "socket:[1]"});
  open_files(proc, 4712, {"/dev/null", "/home/alice/log.txt"});
  open_files(proc, 5000, {"/dev/nvidia0"});  // not in a job: an admin's tool, never a leftover
  open_files(proc, 6000, {"/dev/kfd", "/dev/dri/renderD128"});

  GpuHolderScanner scanner(options(proc, "/dev"));
  const GpuHolderScan scan = scanner.scan();
  EXPECT_EQ(scan.error, "");
  EXPECT_EQ(scan.processes, 4U);
  ASSERT_EQ(scan.holders.size(), 2U);
  EXPECT_EQ(scan.holders[0].pid, 4711);
  EXPECT_EQ(scan.holders[0].comm, "python3");
  EXPECT_EQ(scan.holders[0].job_id, 41U);
  EXPECT_EQ(scan.holders[0].devices, std::vector<std::string>{"/dev/nvidia1"});
  EXPECT_EQ(scan.holders[1].pid, 6000);
  EXPECT_EQ(scan.holders[1].job_id, 42U);
  EXPECT_EQ(scan.holders[1].devices, (std::vector<std::string>{"/dev/kfd", "/dev/dri/renderD128"}));
}

TEST(GpuHolders, AMissingProcRootIsAnErrorNotACrash) {
  GpuHolderScanner scanner(options("/nonexistent/proc", "/dev"));
  const GpuHolderScan scan = scanner.scan();
  EXPECT_NE(scan.error, "");
  EXPECT_TRUE(scan.holders.empty());
}

TEST(GpuHolders, AHungCgroupReadSkipsThatProcessAndTheScanGoesOn) {
  TempDir dir("gpu-holders-hang");
  const std::string proc = dir / "proc";
  write_proc_tree(proc, {{100, "stuck", 'D', "0", "x"},
                         {200, "python3", 'S', "0", "0::/system.slice/slurmstepd.scope/job_7\n"}});
  // A FIFO with no writer: opening it blocks, as a read in a hung kernel path does.
  const std::string cgroup = proc + "/100/cgroup";
  ASSERT_EQ(::unlink(cgroup.c_str()), 0);
  ASSERT_EQ(::mkfifo(cgroup.c_str(), 0644), 0);
  open_files(proc, 200, {"/dev/nvidia3"});
  GpuHolderScanner scanner(options(proc, "/dev"));
  const GpuHolderScan scan = scanner.scan();
  EXPECT_EQ(scan.skipped_pids, std::vector<int64_t>{100});
  ASSERT_EQ(scan.holders.size(), 1U);
  EXPECT_EQ(scan.holders[0].devices, std::vector<std::string>{"/dev/nvidia3"});
  // Released, so that the abandoned reader ends before the test's directory goes.
  const int fd = ::open(cgroup.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
}

// sysfs's renderD<M> -> ../../devices/.../<pci>/drm/renderD<M>, the device's vendor beside it.
void render_node(const std::string& sys, int minor, const std::string& vendor) {
  const std::string pci =
      sys + "/devices/pci0000:00/0000:0" + std::to_string(minor - 120) + ":00.0";
  if (!vendor.empty()) write_file(pci + "/vendor", vendor + "\n");
  const std::string node = pci + "/drm/renderD" + std::to_string(minor);
  std::filesystem::create_directories(node);
  std::filesystem::create_directories(sys + "/class/drm");
  std::filesystem::create_symlink(pci, node + "/device");
  std::filesystem::create_symlink(node, sys + "/class/drm/renderD" + std::to_string(minor));
}

TEST(GpuInventory, AmdGpusAreTheirRenderNodesAndNvidiaGpusTheirDeviceFiles) {
  TempDir dir("gpu-inventory");
  GuardedReader reader(GuardedReader::Options{std::chrono::milliseconds(500), 2});
  const std::string sys = dir / "sys";
  render_node(sys, 128, "0x1002");
  render_node(sys, 130, "0x1002");
  render_node(sys, 131, "0x1af4");  // virtio-gpu: not a compute GPU
  render_node(sys, 132, "");        // vgem: no PCI device
  EXPECT_EQ(read_gpu_inventory(reader, sys, dir / "nodev"), (std::set<std::string>{"0", "2"}));

  const std::string dev = dir / "dev";
  write_file(dev + "/nvidia0", "");
  write_file(dev + "/nvidia1", "");
  write_file(dev + "/nvidiactl", "");
  write_file(dev + "/nvidia-uvm", "");
  EXPECT_EQ(read_gpu_inventory(reader, dir / "nosys", dev), (std::set<std::string>{"0", "1"}));
}

TEST(GpuInventory, ANodeWithoutGpusHasNoInventory) {
  TempDir dir("gpu-inventory-cpu");
  GuardedReader reader(GuardedReader::Options{std::chrono::milliseconds(500), 2});
  write_file(dir / "dev/null", "");
  write_file(dir / "dev/nvidiactl", "");  // a driver loaded, no GPU found
  render_node(dir / "sys", 128, "0x1af4");
  EXPECT_EQ(read_gpu_inventory(reader, dir / "sys", dir / "dev"), std::nullopt);
  EXPECT_EQ(render_node_index("renderD129"), "1");
  EXPECT_EQ(render_node_index("card1"), std::nullopt);
  EXPECT_EQ(render_node_index("renderD12"), std::nullopt);
}

}  // namespace
}  // namespace triage::collector
