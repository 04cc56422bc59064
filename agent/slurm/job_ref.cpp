#include "agent/slurm/job_ref.h"

namespace triage::agent {

namespace {

// Digits, then at most one '_' or '+' followed by digits: the forms job_ref() makes.
bool well_formed(const std::string& s, char sep) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9')
    ++i;
  if (i == 0) return false;
  if (i == s.size()) return true;
  if (s[i] != sep || i + 1 == s.size()) return false;
  for (++i; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

}  // namespace

JobRef job_ref(const JobFacts& f) {
  const std::string id = std::to_string(f.job_id);
  if (f.job_id == 0) throw JobRefError("job 0 does not exist");
  JobRef r;
  r.job_id = f.job_id;
  if (f.array_job_id && *f.array_job_id != 0) {
    if (!f.array_task_id) {
      throw JobRefError("job " + id + " is a record of array " + std::to_string(*f.array_job_id) +
                        " with no task id (a pending array): its id names the whole array");
    }
    r.controller = std::to_string(*f.array_job_id) + "_" + std::to_string(*f.array_task_id);
    r.accounting = r.controller;
    return r;
  }
  if (f.array_task_id) {
    throw JobRefError("job " + id + " has array task id " + std::to_string(*f.array_task_id) +
                      " but no array id");
  }
  if (f.het_job_id && *f.het_job_id != 0) {
    const uint32_t offset = f.het_job_offset.value_or(0);
    if (offset != 0 || *f.het_job_id != f.job_id) {
      throw JobRefError("job " + id + " is component " + std::to_string(offset) +
                        " of heterogeneous job " + std::to_string(*f.het_job_id) +
                        ": Slurm requeues and cancels a het job through its leader only");
    }
    r.controller = id;
    r.accounting = id + "+0";
    return r;
  }
  r.controller = id;
  r.accounting = id;
  return r;
}

JobRef job_ref_from_state(uint64_t job_id, const std::string& controller,
                          const std::string& accounting) {
  if (job_id == 0 || !well_formed(controller, '_') ||
      !(well_formed(accounting, '_') || well_formed(accounting, '+'))) {
    throw JobRefError("job " + std::to_string(job_id) + ": '" + controller + "'/'" + accounting +
                      "' do not name one job attempt");
  }
  return {job_id, controller, accounting};
}

}  // namespace triage::agent
