#include "common/rules_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "common/build_config.h"
#include "common/safe_io.h"
#include "common/text.h"

namespace triage {

std::vector<const RuleEntry*> RuleSection::all(std::string_view key) const {
  std::vector<const RuleEntry*> out;
  for (const auto& e : entries) {
    if (e.key == key) out.push_back(&e);
  }
  return out;
}

const RuleEntry* RuleSection::first(std::string_view key) const {
  for (const auto& e : entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

InputError RuleSection::error(const std::string& message) const {
  return InputError(file, line, "[" + type + " " + id + "]: " + message);
}

InputError RuleSection::error(const RuleEntry& entry, const std::string& message) const {
  return InputError(file, entry.line, entry.key + ": " + message);
}

namespace {

bool valid_name(std::string_view s, bool allow_upper) {
  if (s.empty() || s.size() > 128) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    (allow_upper && c >= 'A' && c <= 'Z') ||
                    (i > 0 && (c == '-' || c == '_' || c == '.'));
    if (!ok) return false;
  }
  return true;
}

constexpr size_t kMaxRulesFile = 8u << 20;

}  // namespace

RulesLoad parse_rules_text(std::string_view text, const std::string& file) {
  RulesLoad out;
  out.files.push_back(file);
  int lineno = 0;
  RuleSection* current = nullptr;
  RuleEntry* last_entry = nullptr;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    if (!is_valid_utf8(raw)) {
      out.errors.emplace_back(file, lineno, "line is not valid UTF-8");
      last_entry = nullptr;
      if (nl == text.size()) break;
      continue;
    }
    const std::string_view line = trim(raw);
    const bool continuation = !raw.empty() && (raw[0] == ' ' || raw[0] == '\t');
    if (line.empty() || line[0] == '#' || line[0] == ';') {
      if (line.empty()) last_entry = nullptr;  // a blank line ends a continued value
      if (nl == text.size()) break;
      continue;
    }
    if (continuation && last_entry != nullptr && line[0] != '[') {
      last_entry->value += ' ';
      last_entry->value += line;
    } else if (line[0] == '[') {
      last_entry = nullptr;
      current = nullptr;
      if (line.back() != ']') {
        out.errors.emplace_back(file, lineno, "section header must end with ']'");
      } else {
        const std::string_view inner = trim(line.substr(1, line.size() - 2));
        const size_t sp = inner.find_first_of(" \t");
        if (sp == std::string_view::npos) {
          out.errors.emplace_back(file, lineno, "section header needs a type and an id: [type id]");
        } else {
          const std::string_view type = inner.substr(0, sp);
          const std::string_view id = trim(inner.substr(sp + 1));
          if (!valid_name(type, false)) {
            out.errors.emplace_back(file, lineno, "bad section type '" + std::string(type) + "'");
          } else if (!valid_name(id, true)) {
            out.errors.emplace_back(
                file, lineno,
                "bad id '" + printable(id) + "' (letters, digits, '-', '_', '.'; at most 128)");
          } else {
            out.sections.push_back(
                RuleSection{std::string(type), std::string(id), file, lineno, {}});
            current = &out.sections.back();
          }
        }
      }
    } else {
      const size_t eq = line.find('=');
      if (eq == std::string_view::npos) {
        out.errors.emplace_back(file, lineno, "expected 'key = value'");
        last_entry = nullptr;
      } else {
        const std::string_view key = trim(line.substr(0, eq));
        const std::string_view value = trim(line.substr(eq + 1));
        if (!valid_name(key, false)) {
          out.errors.emplace_back(file, lineno, "bad key '" + printable(key) + "'");
          last_entry = nullptr;
        } else if (current == nullptr) {
          out.errors.emplace_back(
              file, lineno, std::string("'").append(key).append("' is outside any [section]"));
          last_entry = nullptr;
        } else {
          current->entries.push_back(RuleEntry{std::string(key), std::string(value), lineno});
          last_entry = &current->entries.back();
        }
      }
    }
    if (nl == text.size()) break;
  }
  return out;
}

RulesLoad parse_rules_file(const std::string& path) {
  RulesLoad out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.errors.emplace_back(path, 0, "cannot open rules file");
    return out;
  }
  // Grown block by block to the file's size: a buffer of the largest size allowed, zero-filled,
  // touched 8 MiB a file that the allocator then kept (the agent's live loop loads a catalog
  // while it runs: 18 MiB of RSS for rules files of tens of KiB).
  std::string text;
  std::array<char, 65536> block{};
  while (text.size() <= kMaxRulesFile &&
         in.read(block.data(), static_cast<std::streamsize>(block.size())).gcount() > 0)
    text.append(block.data(), static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxRulesFile) {
    out.errors.emplace_back(path, 0, "rules file is larger than 8 MiB");
    return out;
  }
  return parse_rules_text(text, path);
}

RulesLoad load_rule_layers(const std::vector<std::string>& layers) {
  RulesLoad merged;
  // Ordered by first appearance so the catalogs keep the shipped file order; a replacement takes
  // the place of the section it replaces.
  std::vector<RuleSection> order;
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<bool> removed;

  auto absorb = [&](RulesLoad&& part) {
    for (auto& f : part.files)
      merged.files.push_back(std::move(f));
    for (auto& e : part.errors)
      merged.errors.push_back(std::move(e));
    for (auto& s : part.sections) {
      const bool disable = s.entries.size() == 1 && s.entries[0].key == "disable" &&
                           (s.entries[0].value == "true" || s.entries[0].value == "yes");
      const auto key = std::make_pair(s.type, s.id);
      const auto it = index.find(key);
      if (it != index.end()) {
        removed[it->second] = disable;
        if (!disable) order[it->second] = std::move(s);
      } else if (!disable) {
        index.emplace(key, order.size());
        order.push_back(std::move(s));
        removed.push_back(false);
      }
    }
  };

  for (const auto& layer : layers) {
    std::error_code ec;
    const auto st = std::filesystem::status(layer, ec);
    if (ec || !std::filesystem::exists(st)) {
      // Directories are optional layers; a named file that is missing is a mistake.
      if (layer.size() >= 6 && layer.compare(layer.size() - 6, 6, ".rules") == 0) {
        merged.errors.emplace_back(layer, 0, "rules file does not exist");
      }
      continue;
    }
    if (std::filesystem::is_directory(st)) {
      std::vector<DirEntry> entries;
      try {
        entries = list_dir(layer);
      } catch (const std::system_error& e) {
        merged.errors.emplace_back(layer, 0, "cannot list rules directory: " + e.code().message());
      }
      for (const DirEntry& de : entries) {
        const std::filesystem::path p = std::filesystem::path(layer) / de.name;
        if (p.extension() == ".rules" && std::filesystem::is_regular_file(p, ec))
          absorb(parse_rules_file(p.string()));
      }
    } else {
      absorb(parse_rules_file(layer));
    }
  }
  for (size_t i = 0; i < order.size(); ++i) {
    if (!removed[i]) merged.sections.push_back(std::move(order[i]));
  }
  return merged;
}

std::vector<std::string> default_rule_layers(const std::vector<std::string>& extra) {
  std::vector<std::string> layers;
  if (const char* env = std::getenv("SLURM_TRIAGE_DATADIR"); env != nullptr && *env != '\0') {
    layers.push_back(std::string(env) + "/rules");
  } else {
    struct stat st {};
    const std::string installed = std::string(kInstalledDataDir) + "/rules";
    if (::stat(installed.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      layers.push_back(installed);
    } else {
      layers.emplace_back(kSourceRulesDir);
    }
  }
  if (const char* env = std::getenv("SLURM_TRIAGE_RULES_OVERRIDE"); env != nullptr) {
    if (*env != '\0') layers.emplace_back(env);
  } else {
    layers.push_back(std::string(kSysconfDir) + "/triage.d");
  }
  for (const auto& e : extra)
    layers.push_back(e);
  return layers;
}

}  // namespace triage
