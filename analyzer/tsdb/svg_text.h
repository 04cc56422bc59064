// Text and numbers inside the SVG pictures written beside triage.md (tsdb_svg.cpp,
// analyzer/slowdown_svg.cpp). Host names, labels and times there come from the job's metrics and
// logs, so they are escaped like any text from outside.
#pragma once

#include <string>
#include <string_view>

namespace triage {

// `raw` as XML character data or an attribute value: printable() first (valid UTF-8, a control
// character shown as "\xNN": XML 1.0 allows none but tab), then & < > " escaped.
std::string svg_text(std::string_view raw);

// A coordinate or value with one decimal ("12.3"), as every picture writes them.
std::string svg_number(double v);

}  // namespace triage
