#include "collector/sysfs/hw_counters.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <system_error>

#include "collector/sysfs/gpu_inventory.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::collector {

std::optional<std::pair<uint64_t, uint64_t>> parse_ras_count(std::string_view text) {
  std::optional<uint64_t> ue;
  std::optional<uint64_t> ce;
  for (std::string_view line : split(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trim(line.substr(0, colon));
    const auto value = parse_uint(trim(line.substr(colon + 1)));
    if (!value) continue;
    if (key == "ue") ue = value;
    if (key == "ce") ce = value;
  }
  if (!ue && !ce) return std::nullopt;
  return std::make_pair(ue.value_or(0), ce.value_or(0));
}

std::optional<uint64_t> parse_aer_total(std::string_view text) {
  uint64_t sum = 0;
  bool any = false;
  for (std::string_view line : split(text, '\n')) {
    line = trim(line);
    const size_t sp = line.rfind(' ');
    if (sp == std::string_view::npos) continue;
    const auto value = parse_uint(trim(line.substr(sp + 1)));
    if (!value) continue;
    const std::string_view name = trim(line.substr(0, sp));
    if (name.substr(0, 10) == "TOTAL_ERR_") return value;
    sum += *value;
    any = true;
  }
  if (!any) return std::nullopt;
  return sum;
}

std::string ras_metric_block(std::string_view block) {
  if (block == "xgmi_wafl") return "xgmi";
  return std::string(block);
}

namespace {

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  try {
    for (DirEntry& e : triage::list_dir(path))
      names.push_back(std::move(e.name));
  } catch (const std::system_error&) {
    // a missing sysfs directory has no counters
  }
  return names;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_card_name(const std::string& n) {
  if (n.size() <= 4 || n.compare(0, 4, "card") != 0) return false;
  return std::all_of(n.begin() + 4, n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The PCI address a class device points at ("../../../0000:c1:00.0" -> "0000:c1:00.0").
std::string pci_address_of(const std::string& device_link) {
  char buf[4096];
  const ssize_t n = ::readlink(device_link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string target(buf, static_cast<size_t>(n));
  const size_t slash = target.find_last_of('/');
  return slash == std::string::npos ? target : target.substr(slash + 1);
}

struct Item {
  bool ras = false;
  std::string path;
  std::string card;
  std::string device;
  std::string name;  // RAS block or AER severity
};

constexpr const char* kAerSeverities[] = {"correctable", "nonfatal", "fatal"};

std::vector<Item> discover(const std::string& root) {
  std::vector<Item> items;
  std::set<std::string> gpu_devices;
  const std::string drm = root + "/class/drm";
  for (const std::string& card : list_dir(drm)) {
    if (!is_card_name(card)) continue;
    std::string dev = drm;
    dev.append("/").append(card).append("/device");
    const std::string addr = pci_address_of(dev);
    if (!addr.empty()) gpu_devices.insert(addr);
    for (const std::string& f : list_dir(dev + "/ras")) {
      static constexpr std::string_view kSuffix = "_err_count";
      if (f.size() <= kSuffix.size() ||
          f.compare(f.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
        continue;
      }
      std::string path = dev;
      path.append("/ras/").append(f);
      items.push_back({true, std::move(path), card, addr, f.substr(0, f.size() - kSuffix.size())});
    }
    for (const char* sev : kAerSeverities) {
      const std::string p = dev + "/aer_dev_" + sev;
      if (exists(p)) items.push_back({false, p, card, addr, sev});
    }
  }
  const std::string pci = root + "/bus/pci/devices";
  for (const std::string& addr : list_dir(pci)) {
    if (gpu_devices.count(addr) != 0) continue;
    for (const char* sev : kAerSeverities) {
      std::string p = pci;
      p.append("/").append(addr).append("/aer_dev_").append(sev);
      if (exists(p)) items.push_back({false, p, "", addr, sev});
    }
  }
  return items;
}

}  // namespace

HwCounterReader::HwCounterReader(Options options)
    : options_(std::move(options)),
      reader_(GuardedReader::Options{options_.read_timeout, options_.max_stuck}) {}

SysfsSnapshot HwCounterReader::read() {
  SysfsSnapshot snap;
  snap.time_usec = now_usec();
  const std::vector<Item> items = discover(options_.sysfs_root);
  std::vector<std::string> paths;
  paths.reserve(items.size());
  for (const Item& item : items)
    paths.push_back(item.path);
  GuardedReader::FileReads read = reader_.read_files(std::move(paths), size_t{16} * 1024);
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    if (!read.data[i]) continue;
    const std::string& text = *read.data[i];
    if (item.ras) {
      const auto counts = parse_ras_count(text);
      if (!counts) {
        snap.errors.push_back(item.path + ": expected 'ue: N' and 'ce: N' lines");
        continue;
      }
      snap.ras.push_back(
          {item.card, item.device, item.name, counts->first, counts->second, item.path});
    } else {
      const auto total = parse_aer_total(text);
      if (!total) {
        snap.errors.push_back(item.path + ": expected 'NAME COUNT' lines");
        continue;
      }
      snap.aer.push_back({item.device, item.card, item.name, *total, item.path});
    }
  }
  snap.errors.insert(snap.errors.end(), read.errors.begin(), read.errors.end());
  snap.skipped = std::move(read.skipped);
  // The ports go through the same reader: one stuck list, one cap on stuck threads.
  IbRead ib = read_ib_ports(reader_, options_.infiniband_dir.empty()
                                         ? options_.sysfs_root + "/class/infiniband"
                                         : options_.infiniband_dir);
  snap.ib = std::move(ib.ports);
  snap.errors.insert(snap.errors.end(), ib.errors.begin(), ib.errors.end());
  snap.skipped.insert(snap.skipped.end(), ib.skipped.begin(), ib.skipped.end());
  snap.gpus = read_gpu_inventory(reader_, options_.sysfs_root, options_.gpu_device_dir);
  snap.stuck = reader_.stuck_reads();
  return snap;
}

HwCounterWatch::HwCounterWatch(std::string host, std::string boot_id)
    : host_(std::move(host)), boot_id_(std::move(boot_id)) {}

namespace {

KernelEvent counter_event(const std::string& id, const std::string& kind, Severity severity,
                          const std::string& action, uint64_t value, int64_t now) {
  KernelEvent e;
  e.id = id;
  e.kind = kind;
  e.severity = severity;
  e.action = action;
  e.count = value;
  e.time_usec = now;
  e.last_usec = now;
  e.rule = "sysfs-counter";
  return e;
}

std::string gpu_name(const std::string& card, const std::string& device) {
  return device.empty() ? card : card + " (" + device + ")";
}

}  // namespace

std::vector<KernelEvent> HwCounterWatch::update(const SysfsSnapshot& snap) {
  std::vector<KernelEvent> out;
  const int64_t now = snap.time_usec;
  auto rose = [&](const std::string& key, uint64_t value) {
    auto [it, fresh] = last_.emplace(key, value);
    const bool up = fresh ? value > 0 : value > it->second;
    it->second = value;
    return up;
  };
  for (const RasCounter& c : snap.ras) {
    const std::string base = "sysfs-ras:" + boot_id_ + ":" + c.card + ":" + c.block;
    // One event per counter that rose: uncorrectable errors drain, correctable ones are watched.
    auto ras_event = [&](const char* type, uint64_t value, const char* kind, Severity severity,
                         const char* action, const char* what) {
      if (!rose(base + ":" + type, value)) return;
      KernelEvent e = counter_event(base + ":" + type, kind, severity, action, value, now);
      e.summary = std::to_string(value) + " " + what + " " + c.block + " error(s) on " +
                  gpu_name(c.card, c.device) + " since boot (sysfs RAS counter)";
      e.block = c.block;
      e.device = c.device.empty() ? c.card : c.device;
      e.fields["path"] = c.path;
      e.lines.push_back(c.path + ": ue: " + std::to_string(c.ue) + " ce: " + std::to_string(c.ce));
      out.push_back(std::move(e));
    };
    ras_event("ue", c.ue, "gpu-ras-uncorrectable", Severity::kCritical, "drain", "uncorrectable");
    ras_event("ce", c.ce, "gpu-ras-correctable", Severity::kWarning, "investigate", "correctable");
  }
  for (const AerCounter& c : snap.aer) {
    const std::string id = "sysfs-aer:" + boot_id_ + ":" + c.device + ":" + c.severity;
    if (!rose(id, c.total) || c.severity == "correctable") continue;
    const bool fatal = c.severity == "fatal";
    KernelEvent e = counter_event(id, "pcie-aer", fatal ? Severity::kCritical : Severity::kError,
                                  fatal ? "drain" : "investigate", c.total, now);
    e.summary = std::to_string(c.total) + " PCIe " + (fatal ? "fatal" : "non-fatal") +
                " error(s) on " + (c.card.empty() ? c.device : gpu_name(c.card, c.device)) +
                " since boot (AER counter)";
    e.device = c.device;
    e.fields["aer_severity"] = c.severity;
    e.fields["path"] = c.path;
    e.lines.push_back(c.path + ": total " + std::to_string(c.total));
    out.push_back(std::move(e));
  }
  for (const StuckRead& s : snap.stuck) {
    KernelEvent e;
    e.id = "stuck-sysfs:" + boot_id_ + ":" + s.path + ":" + std::to_string(s.since_usec);
    e.kind = "stuck-sysfs-read";
    e.severity = Severity::kError;
    e.action = "investigate";
    e.rule = "sysfs-reader";
    e.time_usec = s.since_usec;
    e.last_usec = now;
    const int64_t secs = (now - s.since_usec) / 1000000;
    e.summary = "read of " + s.path + " has not returned for " + std::to_string(secs) +
                "s (a driver is stuck in the kernel)";
    e.fields["path"] = s.path;
    e.lines.push_back(e.summary);
    out.push_back(std::move(e));
  }
  for (KernelEvent& e : out) {
    e.host = host_;
    e.boot_id = boot_id_;
  }
  return out;
}

}  // namespace triage::collector
