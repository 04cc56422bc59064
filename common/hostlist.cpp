#include "common/hostlist.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/error.h"
#include "common/text.h"

namespace triage {

namespace {

// Splits at top-level commas (not inside brackets).
std::vector<std::string_view> top_level_items(std::string_view s, const std::string& origin) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {
      if (++depth > 1) throw InputError(origin, 0, "nested '[' in hostlist '" + printable(s) + "'");
    } else if (s[i] == ']') {
      if (--depth < 0)
        throw InputError(origin, 0, "unbalanced ']' in hostlist '" + printable(s) + "'");
    } else if ((s[i] == ',' || s[i] == ' ') && depth == 0) {
      if (i > start) out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) throw InputError(origin, 0, "unbalanced '[' in hostlist '" + printable(s) + "'");
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

void expand_item(std::string_view item, const std::string& origin, size_t max_hosts,
                 std::vector<std::string>& out) {
  // Expand the first bracket group, then recurse on the rest so that "a[1-2]b[3-4]" works.
  const size_t lb = item.find('[');
  if (lb == std::string_view::npos) {
    if (out.size() >= max_hosts)
      throw InputError(origin, 0,
                       "hostlist expands to more than " + std::to_string(max_hosts) + " hosts");
    out.emplace_back(item);
    return;
  }
  const size_t rb = item.find(']', lb);
  const std::string_view prefix = item.substr(0, lb);
  const std::string_view ranges = item.substr(lb + 1, rb - lb - 1);
  const std::string_view suffix = item.substr(rb + 1);
  if (ranges.empty())
    throw InputError(origin, 0, "empty brackets in hostlist item '" + printable(item) + "'");
  for (std::string_view r : split(ranges, ',')) {
    r = trim(r);
    const size_t dash = r.find('-');
    const std::string_view lo_s = dash == std::string_view::npos ? r : r.substr(0, dash);
    const std::string_view hi_s = dash == std::string_view::npos ? r : r.substr(dash + 1);
    const auto lo = parse_uint(lo_s);
    const auto hi = parse_uint(hi_s);
    if (!lo || !hi || lo_s.size() > 18 || hi_s.size() > 18) {
      throw InputError(
          origin, 0, "bad range '" + printable(r) + "' in hostlist item '" + printable(item) + "'");
    }
    if (*hi < *lo)
      throw InputError(origin, 0, "descending range '" + printable(r) + "' in hostlist");
    if (*hi - *lo >= max_hosts) {
      throw InputError(origin, 0,
                       "hostlist expands to more than " + std::to_string(max_hosts) + " hosts");
    }
    const size_t width = lo_s.size();  // zero padding follows the low bound, as in Slurm
    for (uint64_t n = *lo; n <= *hi; ++n) {
      std::string num = std::to_string(n);
      if (num.size() < width) num.insert(0, width - num.size(), '0');
      std::string head(prefix);
      head += num;
      std::vector<std::string> tails;
      expand_item(suffix, origin, max_hosts, tails);
      for (auto& t : tails) {
        if (out.size() >= max_hosts) {
          throw InputError(origin, 0,
                           "hostlist expands to more than " + std::to_string(max_hosts) + " hosts");
        }
        out.push_back(head + t);
      }
    }
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expr, const std::string& origin,
                                         size_t max_hosts) {
  std::vector<std::string> out;
  expr = trim(expr);
  if (expr.size() > 65536) throw InputError(origin, 0, "hostlist longer than 64 KiB");
  for (const auto item : top_level_items(expr, origin)) {
    if (item.find(']') != std::string_view::npos && item.find('[') == std::string_view::npos) {
      throw InputError(origin, 0, "unbalanced ']' in hostlist item '" + printable(item) + "'");
    }
    std::vector<std::string> part;
    expand_item(item, origin, max_hosts, part);
    for (auto& h : part) {
      if (out.size() >= max_hosts) {
        throw InputError(origin, 0,
                         "hostlist expands to more than " + std::to_string(max_hosts) + " hosts");
      }
      out.push_back(std::move(h));
    }
  }
  return out;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  // Group "prefix + trailing digits" names by (prefix, digit width); others stay verbatim.
  struct Group {
    std::string prefix;
    size_t width;
    std::vector<uint64_t> nums;
  };
  std::vector<Group> groups;
  std::map<std::pair<std::string, size_t>, size_t> index;
  std::vector<std::pair<bool, size_t>> slots;  // (is_group, idx)
  std::vector<std::string> verbatim;
  for (const auto& h : hosts) {
    size_t d = h.size();
    while (d > 0 && h[d - 1] >= '0' && h[d - 1] <= '9')
      --d;
    if (d == h.size() || h.size() - d > 18) {
      slots.emplace_back(false, verbatim.size());
      verbatim.push_back(h);
      continue;
    }
    const auto key = std::make_pair(h.substr(0, d), h.size() - d);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, groups.size()).first;
      groups.push_back(Group{key.first, key.second, {}});
      slots.emplace_back(true, it->second);
    }
    groups[it->second].nums.push_back(std::stoull(h.substr(d)));
  }
  std::string out;
  for (const auto& [is_group, idx] : slots) {
    if (!out.empty()) out += ',';
    if (!is_group) {
      out += verbatim[idx];
      continue;
    }
    Group& g = groups[idx];
    std::sort(g.nums.begin(), g.nums.end());
    g.nums.erase(std::unique(g.nums.begin(), g.nums.end()), g.nums.end());
    auto fmt = [&](uint64_t n) {
      std::string s = std::to_string(n);
      if (s.size() < g.width) s.insert(0, g.width - s.size(), '0');
      return s;
    };
    if (g.nums.size() == 1) {
      out += g.prefix + fmt(g.nums[0]);
      continue;
    }
    out += g.prefix + "[";
    for (size_t i = 0; i < g.nums.size();) {
      size_t j = i;
      while (j + 1 < g.nums.size() && g.nums[j + 1] == g.nums[j] + 1)
        ++j;
      if (i > 0) out += ",";
      out += fmt(g.nums[i]);
      if (j > i) out.append("-").append(fmt(g.nums[j]));
      i = j + 1;
    }
    out += "]";
  }
  return out;
}

}  // namespace triage
