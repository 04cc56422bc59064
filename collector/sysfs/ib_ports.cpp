#include "collector/sysfs/ib_ports.h"

#include <sys/stat.h>

#include <system_error>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage::collector {

const std::vector<std::string> kIbPortCounters = {
    "link_downed",
    "symbol_error",
    "link_error_recovery",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
};

std::optional<std::string> parse_ib_state(std::string_view text) {
  std::string_view s = trim(text);
  const size_t colon = s.find(':');
  if (colon != std::string_view::npos) {
    if (!parse_uint(trim(s.substr(0, colon)))) return std::nullopt;
    s = trim(s.substr(colon + 1));
  }
  if (s.empty() || s.find_first_of(" \t\n") != std::string_view::npos) return std::nullopt;
  return std::string(s);
}

std::optional<double> parse_ib_rate(std::string_view text) {
  const std::string_view s = trim(text);
  const size_t sp = s.find(' ');
  if (sp == std::string_view::npos || s.substr(sp + 1, 6) != "Gb/sec") return std::nullopt;
  const auto v = parse_double(s.substr(0, sp));
  if (!v || *v < 0) return std::nullopt;
  return v;
}

namespace {

std::vector<std::string> names_in(const std::string& path) {
  std::vector<std::string> names;
  try {
    for (DirEntry& e : list_dir(path))
      names.push_back(std::move(e.name));
  } catch (const std::system_error&) {
    // no such directory: no devices, ports or counters there
  }
  return names;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

enum class Field { kState, kPhysState, kLinkLayer, kRate, kCounter };

struct Item {
  size_t port = 0;  // index into the ports
  Field field = Field::kCounter;
  std::string counter;  // the counter's key in IbPort::counters
  std::string path;
};

// Applies one file's text to its port; false when the text is not what the file holds.
bool apply(IbPort& p, const Item& item, const std::string& text) {
  switch (item.field) {
    case Field::kState:
    case Field::kPhysState:
    case Field::kLinkLayer: {
      const auto v = parse_ib_state(text);
      if (!v) return false;
      (item.field == Field::kState       ? p.state
       : item.field == Field::kPhysState ? p.phys_state
                                         : p.link_layer) = *v;
      return true;
    }
    case Field::kRate:
      p.rate_gbps = parse_ib_rate(text);
      return p.rate_gbps.has_value();
    case Field::kCounter: {
      const auto v = parse_uint(trim(text));
      if (!v) return false;
      p.counters[item.counter] = *v;
      return true;
    }
  }
  return false;
}

const char* expected(Field f) {
  switch (f) {
    case Field::kState:
      return "expected 'N: STATE'";
    case Field::kPhysState:
      return "expected 'N: PHYS_STATE'";
    case Field::kLinkLayer:
      return "expected a link layer name";
    case Field::kRate:
      return "expected 'N Gb/sec (...)'";
    case Field::kCounter:
      return "expected a count";
  }
  return "unexpected content";
}

}  // namespace

IbRead read_ib_ports(GuardedReader& reader, const std::string& infiniband_dir) {
  IbRead out;
  std::vector<Item> items;
  for (const std::string& dev : names_in(infiniband_dir)) {
    const std::string ports_dir =
        std::string(infiniband_dir).append("/").append(dev).append("/ports");
    for (const std::string& port : names_in(ports_dir)) {
      const size_t idx = out.ports.size();
      IbPort p;
      p.device = dev;
      p.port = port;
      p.path = std::string(ports_dir).append("/").append(port);
      items.push_back({idx, Field::kState, "", p.path + "/state"});
      items.push_back({idx, Field::kPhysState, "", p.path + "/phys_state"});
      items.push_back({idx, Field::kRate, "", p.path + "/rate"});
      if (exists(p.path + "/link_layer"))
        items.push_back({idx, Field::kLinkLayer, "", p.path + "/link_layer"});
      for (const std::string& c : kIbPortCounters) {
        const std::string f = p.path + "/counters/" + c;
        if (exists(f)) items.push_back({idx, Field::kCounter, c, f});
      }
      for (const std::string& c : names_in(p.path + "/hw_counters"))
        items.push_back({idx, Field::kCounter, "hw_counters/" + c, p.path + "/hw_counters/" + c});
      out.ports.push_back(std::move(p));
    }
  }
  std::vector<std::string> paths;
  paths.reserve(items.size());
  for (const Item& item : items)
    paths.push_back(item.path);
  GuardedReader::FileReads read = reader.read_files(std::move(paths), size_t{4} * 1024);
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    if (!read.data[i]) continue;
    if (!apply(out.ports[item.port], item, *read.data[i]))
      out.errors.push_back(item.path + ": " + expected(item.field));
  }
  out.errors.insert(out.errors.end(), read.errors.begin(), read.errors.end());
  out.skipped = std::move(read.skipped);
  return out;
}

}  // namespace triage::collector
