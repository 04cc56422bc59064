// The first thing every diagnosis does: find out what the TSDB holds (metric families, hosts, time
// range, scrape interval), map training steps to wall-clock time, mark checkpoint windows and
// ghost data, and check that the database belongs to the job (the wrong-database guard).
#pragma once

#include <optional>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

// Fills `d` and the discovery fields of `res` (hosts, window, families, scrape interval, guard).
// `data_min`/`data_max` are what the source knows about the TSDB's extent (block metadata and
// the head), absent for a cluster Prometheus. `own_database` is true for the job's own TSDB, where
// finding only other nodes means the wrong database. Returns false when there is nothing to
// diagnose (no metrics, no overlap with the job window, or the guard refused); the reason is in
// res.notes.
bool discover(Querier& q, Scope& scope, const TsdbRequest& req, const Thresholds& th,
              std::optional<double> data_min, std::optional<double> data_max, bool own_database,
              Discovery& d, TsdbResult& res, std::vector<QueryRecord>* sink);

// The guard alone, on an already built step map: compares the log's last completed step and loss
// with the tb_* series (`losses` are real-sample losses at the step marks' times).
void check_guard(const TsdbRequest& req, const Discovery& d,
                 const std::vector<std::pair<int64_t, double>>& losses, TsdbResult::Guard& guard);

// Turns the times at which a condition held (one per evaluation step) into intervals, each point
// standing for [t - lookback, t].
std::vector<Interval> runs_to_intervals(const std::vector<double>& times, double step,
                                        double lookback);

}  // namespace triage::tsdb
