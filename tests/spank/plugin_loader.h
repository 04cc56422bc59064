// Loads the real spank_triage.so the way Slurm does (dlopen, then dlsym of the plugin_* symbols and
// the slurm_spank_* callbacks), with the SPANK API served by fake_spank.cpp.
#pragma once

#include <dlfcn.h>

#include <stdexcept>
#include <string>

extern "C" {
#include <slurm/spank.h>
}

namespace triage::testing {

class LoadedPlugin {
 public:
  explicit LoadedPlugin(const std::string& path) {
    // RTLD_NOW: every symbol the plugin needs must be resolvable now, as in slurmstepd.
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  }
  ~LoadedPlugin() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  void* symbol(const char* name) const { return dlsym(handle_, name); }

  // Calls slurm_spank_<name>(handle, argc, argv); throws when the plugin has no such callback.
  int call(const char* name, spank_t sp, int argc, char** argv) const {
    const std::string full = std::string("slurm_spank_") + name;
    void* sym = symbol(full.c_str());
    if (sym == nullptr) throw std::runtime_error("no callback " + full);
    // dlsym returns object pointers; POSIX guarantees the conversion for functions.
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
    auto* fn = reinterpret_cast<spank_f*>(sym);
    return fn(sp, argc, argv);
  }

 private:
  void* handle_ = nullptr;
};

}  // namespace triage::testing
