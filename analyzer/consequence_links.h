// How every other failure found relates to the primary one: its consequence, the consequence of
// another cause, independent of it, or minor. This is the report's "additional findings".
#pragma once

#include <vector>

#include "analyzer/failure_ranking.h"
#include "analyzer/primary_failure.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"

namespace triage {

// Whether occurrence `a` explains `b`: the catalog's `explains` lists, or `b` is the traceback
// class and its traceback ended in `a`'s line.
bool explains_occurrence(const SignatureCatalog& catalog, const ClassOccurrence& a,
                         const ClassOccurrence& b);

// The findings other than the primary, each with its relation ("consequence of <class>",
// "independent", "minor"); trusted ones first, then by line.
std::vector<AdditionalFinding> link_consequences(const FoundClasses& found,
                                                 const RankingResult& rank,
                                                 const SignatureCatalog& catalog);

}  // namespace triage
