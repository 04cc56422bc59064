// Error vocabularies as data (rules/vocab-*.rules): the finite sets of names and message strings
// that projects print their errors in (errno and strerror, Python's exceptions, CUDA, HIP, NCCL,
// absl status codes, torch.distributed, Ray, huggingface_hub), each token mapped to the failure
// class it means. The scanner reads a token out of the structure it stands in (a Python exception
// line, an NCCL line, a status line) and looks it up; a class's patterns only refine that.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/blame.h"
#include "common/error.h"
#include "common/rules_file.h"

namespace triage {

// Where in a line a group's tokens are read (`read-in`, repeatable).
enum class VocabPlace : uint8_t {
  kExceptionType,     // the type of a Python exception line (`pkg.mod.TypeName: message`),
                      // alone or with the tail of its module path (`torch.cuda.OutOfMemoryError`)
  kExceptionMessage,  // inside the message of a Python exception line
  kStatus,            // `TOKEN:` at a word start (absl/gRPC status as XLA and JAX print them)
  kNcclLine,          // anywhere in a line NCCL or RCCL printed (`NCCL WARN`, `NCCL error`)
  kSlurmLine,         // anywhere in a line a Slurm program printed (`srun: error: ...`,
                      // `slurmstepd: error: ...`, `slurmstepd-node07: error: ...`)
  kWord,              // anywhere, as a whole word (a token long and distinctive enough)
  kHelpLine,          // at the start of a line: Open MPI, PRRTE and PMIx print their help files'
                      // lines as they stand (show_help), so a help text's line opens the line
  kMpiLine,           // anywhere in a line Open MPI's, ORTE's, PRRTE's or PMIx's error log printed
                      // (`OPAL ERROR: ...`, `[[1234,0],0] ORTE_ERROR_LOG: ...`, `PMIX ERROR: ...`,
                      // `pml_ucx.c:309  Error: ...`) or in its MPI error handler's `*** ` banner
  kUcxLine,           // anywhere in a line UCX's logger printed at ERROR or FATAL level
                      // (`... ib_mlx5_log.c:143  UCX  ERROR ...`) or its fatal-error handler
                      // printed (`[host:pid:thread:tid] ib_mlx5_log.c:139  ...`, no level); its
                      // WARN chatter is not read
};

struct VocabGroup {
  std::string id;
  std::string title;
  std::string defined_in;
  std::vector<VocabPlace> places;
  struct Example {
    std::string cls;   // the class the line must be read as
    std::string line;  // a real-format log line
    int line_no = 0;
  };
  std::vector<Example> examples;
  std::string file;
  int line = 0;
  bool reads_in(VocabPlace p) const;
};

struct VocabEntry {
  std::string id;  // "<group>.<name>"
  uint32_t group = 0;
  std::string token;                  // the name as the project prints it
  std::vector<std::string> messages;  // its message strings, when the vocabulary defines them
  std::string means;
  std::string cls;  // a [signature] class id
  Blame blame = Blame::kUnknown;
  bool has_blame = false;
  std::string defined_in;
  std::string file;
  int line = 0;
};

struct Vocabulary {
  std::vector<VocabGroup> groups;
  std::vector<VocabEntry> entries;
};

// Loads [vocab-group] and [vocab] sections. `class_ids` are the loaded classes: an entry naming
// another class, an entry without `defined-in` (its own or its group's), or a group's example
// naming an unknown class is an error at its file:line.
Vocabulary load_vocabulary(const std::vector<RuleSection>& sections,
                           const std::vector<std::string>& class_ids,
                           std::vector<InputError>& errors);

// A Python exception line: `[pkg.mod.]TypeName: message` (or the bare type name), the type's last
// component starting with a capital letter, possibly after the opening quote marks of a pasted
// copy (`` `RuntimeError: ...` ``). "TypeName:message" without the space counts when the name
// ends in Error or Exception. Views into the line.
struct ExceptionLine {
  std::string_view module;  // "torch.distributed" (empty for a builtin)
  std::string_view type;    // "DistNetworkError"
  std::string_view message;
  size_t message_at = 0;  // offset of the message in the line
  size_t at = 0;          // offset of the module path (or the type) in the line
};
bool parse_exception_line(std::string_view text, ExceptionLine& out);

// Whether `text` is a line a Slurm program printed: it starts with the program's name and a colon
// (`srun:`, `slurmstepd:`, `slurmd:`, `salloc:`, `sbatch:`), slurmstepd's name possibly with the
// node's (`slurmstepd-node07:`, as 23.02 and later print it).
bool is_slurm_line(std::string_view text);

// Whether `text` is a line Open MPI's, ORTE's, PRRTE's or PMIx's error logging printed: it holds
// one of their error-log markers (`OPAL ERROR: `, `ORTE_ERROR_LOG: `, `PRTE_ERROR_LOG: `,
// `PMIX ERROR: `, `PRTE ERROR: `), a source position before `Error: ` (opal_output_verbose's
// "pml_ucx.c:309  Error: "), or opens with the MPI error handler's `*** ` banner after the
// `[host:pid] ` prefix.
bool is_mpi_line(std::string_view text);

// Whether `text` is a line UCX printed as an error: its logger's `UCX`, padded with spaces, then
// ERROR or FATAL (UCX 1.x prints the component as %-4s and the level as %-5s); or, with no level
// (any other level rules the line out), the fatal-error handler's `[host:pid:thread:tid] ` prefix
// or the logger's `file.c:line ` source position opening the line.
bool is_ucx_error_line(std::string_view text);

// Whether `token`, found at `at` in `text`, stands in `place` there. `exc` is the line's parse
// when it is an exception line (null otherwise).
bool token_in_place(std::string_view text, size_t at, size_t len, VocabPlace place,
                    const ExceptionLine* exc);

}  // namespace triage
