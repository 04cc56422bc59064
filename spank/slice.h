// std::string_view::substr without its out_of_range throw: the plugin is built without exceptions
// and should not pull libstdc++'s throw helpers into slurmstepd.
#pragma once

#include <cstddef>
#include <string_view>

namespace triage::spank {

inline std::string_view slice(std::string_view s, size_t pos,
                              size_t n = std::string_view::npos) noexcept {
  if (pos > s.size()) return {};
  const size_t left = s.size() - pos;
  return {s.data() + pos, n < left ? n : left};
}

}  // namespace triage::spank
