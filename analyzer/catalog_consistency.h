// Whether the failure classes of a loaded catalog agree with each other: the roles the diagnosis
// looks classes up by are each played by one class, the required ones exist, exit codes are not
// claimed twice, and playbooks are ones full mode knows. Loading checks each key alone; this
// checks the catalog as a whole, for `slurm-triage rules check`.
#pragma once

#include <string>
#include <vector>

#include "analyzer/signature_catalog.h"
#include "common/error.h"

namespace triage {

// Every inconsistency among the catalog's classes, each at the file and line of the field at fault
// (empty when the catalog is consistent); `known_playbooks` are the playbook ids full mode runs.
std::vector<InputError> check_catalog_consistency(const SignatureCatalog& catalog,
                                                  const std::vector<std::string>& known_playbooks);

}  // namespace triage
