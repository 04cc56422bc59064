// Full mode's hand-off from the log triage to the TSDB playbooks (analyzer/tsdb/): what the log and
// the node evidence established becomes a TsdbRequest (class, failure moment, last step, accused
// hosts, the job's window and nodes), and the TsdbResult comes back into the triage, as data the
// report renders, with notes and recommendations for the hardware verdicts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"
#include "analyzer/tsdb/tsdb.h"
#include "common/error.h"
#include "common/model.h"

namespace triage {

struct TsdbHandoffOptions {
  std::string cluster_url;               // --prometheus-url: a cluster Prometheus, tried first
  std::string host_label = "host";       // its node label
  std::string prometheus_binary;         // --prometheus; empty: prometheus in $PATH
  std::vector<std::string> rule_layers;  // threshold layers; empty: the default layers
  double query_timeout_s = 60;
  std::string scratch_dir;  // where the private TSDB copy goes; empty: $TMPDIR or /tmp
};

// Takes the TSDB keys of the site's triage.conf (PrometheusURL, PrometheusHostLabel,
// PrometheusBinary, TsdbScratchDir, TsdbQueryTimeout) into `options`, where the command line has
// not set them already (`cli_url`/`cli_binary` say which it set). The agent owns the file and
// rejects what it does not know; here only these keys are read, and other keys are left alone.
// Returns the problems found in these keys ("file:line: ..."); then nothing from the file is used.
std::vector<InputError> apply_site_tsdb_config(const std::string& path, bool cli_url,
                                               bool cli_binary, TsdbHandoffOptions& options);

// The request for the playbooks: `catalog` says which playbooks apply to the primary failure and
// whether it is a stall (whose failure moment is its last step, not its evidence's time).
tsdb::TsdbRequest tsdb_request_for(const Triage& t, const SignatureCatalog& catalog,
                                   const Evidence* evidence, const TsdbHandoffOptions& options);

// Stores `result` in t.tsdb (the report renders it) and adds what it means for the job's reader: a
// note when no metrics could be read, the hardware verdicts as recommendations.
void attach_tsdb_result(Triage& t, tsdb::TsdbResult result);

// The timeline's file name beside a report: "triage.md" -> "triage-timeline.svg",
// "triage-4242.md" -> "triage-4242-timeline.svg".
// Each host's mean GPU core clock over the run, from the TSDB timeline.
std::vector<NodeClockSeries> node_clocks_of(const tsdb::Timeline& tl);

// Full mode: names the node of the job's slowdown by the GPU clocks in the TSDB (the one node
// whose clocks fell when the step time rose), where the log alone could not or named another.
void attribute_slowdown_to_clocks(Triage& t);

// Full mode: adds to t.stragglers the nodes whose GPU clocks in the TSDB ran below the others'
// (find_node_stragglers; rank null), those with a rank straggler already left out; slowest first.
void add_node_stragglers(Triage& t);

std::string timeline_name_for(const std::string& report_md_name);

}  // namespace triage
