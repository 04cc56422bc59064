#include "collector/sysfs/gpu_inventory.h"

#include <algorithm>
#include <system_error>
#include <vector>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage::collector {

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() < 7 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  try {
    for (DirEntry& e : list_dir(dir))
      names.push_back(std::move(e.name));
  } catch (const std::system_error&) {
    // no such directory: no GPU of this kind
  }
  return names;
}

}  // namespace

std::optional<std::string> render_node_index(std::string_view name) {
  constexpr std::string_view kRender = "renderD";
  if (name.substr(0, kRender.size()) != kRender) return std::nullopt;
  const std::string_view n = name.substr(kRender.size());
  if (!all_digits(n)) return std::nullopt;
  const auto minor = parse_uint(n);
  if (!minor || *minor < 128) return std::nullopt;
  return std::to_string(*minor - 128);
}

std::optional<std::set<std::string>> read_gpu_inventory(GuardedReader& reader,
                                                        const std::string& sysfs_root,
                                                        const std::string& dev_dir) {
  std::set<std::string> present;
  for (const std::string& name : names_in(dev_dir)) {
    constexpr std::string_view kNvidia = "nvidia";
    const std::string_view n = std::string_view(name).substr(std::min(name.size(), kNvidia.size()));
    if (name.compare(0, kNvidia.size(), kNvidia) == 0 && all_digits(n)) {
      present.insert(std::to_string(parse_uint(n).value_or(0)));
    }
  }
  const std::string drm = sysfs_root + "/class/drm";
  std::vector<std::string> indices;
  std::vector<std::string> vendor_files;
  for (const std::string& name : names_in(drm)) {
    if (auto index = render_node_index(name)) {
      indices.push_back(*index);
      std::string vendor = drm;
      vendor += "/";
      vendor += name;
      vendor += "/device/vendor";
      vendor_files.push_back(std::move(vendor));
    }
  }
  // Copied: read_files takes its list.
  const GuardedReader::FileReads vendors = reader.read_files(vendor_files, 64);
  for (size_t i = 0; i < indices.size(); ++i) {
    const bool unread = std::find(vendors.skipped.begin(), vendors.skipped.end(),
                                  vendor_files[i]) != vendors.skipped.end();
    const std::string_view vendor = vendors.data[i] ? trim(*vendors.data[i]) : "";
    if (vendor == "0x1002" || vendor == "0x10de" || unread) present.insert(indices[i]);
  }
  if (present.empty()) return std::nullopt;
  return present;
}

}  // namespace triage::collector
