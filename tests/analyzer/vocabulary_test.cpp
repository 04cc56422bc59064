// Error vocabularies: a token is read out of the structure it stands in (a Python exception line
// and its chain, an NCCL line, a status line) and names its class; the vocabulary files are checked
// like the catalog; a class a token named outranks the generic catch-alls.
#include "analyzer/vocabulary.h"

#include <gtest/gtest.h>

#include "analyzer/failure_ranking.h"
#include "analyzer/signature_examples.h"
#include "line_reading.h"
#include "test_support.h"

namespace triage {
namespace {

using test::Read;
using test::read_line;

Read read_one(const std::string& line) {
  return read_line(line + "\n", 1);
}

TEST(ExceptionLine, TypeModuleAndMessageAreReadFromTheLine) {
  ExceptionLine e;
  ASSERT_TRUE(
      parse_exception_line("torch.distributed.DistNetworkError: Connection reset by peer", e));
  EXPECT_EQ(e.module, "torch.distributed");
  EXPECT_EQ(e.type, "DistNetworkError");
  EXPECT_EQ(e.message, "Connection reset by peer");
  ASSERT_TRUE(parse_exception_line("KeyboardInterrupt", e));
  EXPECT_EQ(e.type, "KeyboardInterrupt");
  EXPECT_EQ(e.message, "");
}

TEST(ExceptionLine, ShoutedLevelsAndProseAreNotExceptions) {
  ExceptionLine e;
  EXPECT_FALSE(parse_exception_line("ERROR: Address already in use", e));
  EXPECT_FALSE(parse_exception_line("Training failed: Address already in use", e));
  EXPECT_FALSE(parse_exception_line("step 10: loss 2.3", e));
  EXPECT_FALSE(parse_exception_line("http://host:80 refused", e));
}

TEST(ExceptionLine, AnExceptionPastedInQuoteMarksIsStillOne) {
  // As a bug report quotes it, inside inline code marks.
  ExceptionLine e;
  const std::string_view line =
      "`RuntimeError: unexpected EOF, expected 8 more bytes. The file might be corrupted.`";
  ASSERT_TRUE(parse_exception_line(line, e));
  EXPECT_EQ(e.type, "RuntimeError");
  EXPECT_EQ(e.at, 1u);
  EXPECT_EQ(e.message.substr(0, 14), "unexpected EOF");
}

TEST(ExceptionLine, AnErrorRaisedWithoutTheSpaceAfterItsColonIsStillOne) {
  ExceptionLine e;
  ASSERT_TRUE(parse_exception_line("ValueError:Network outputs is NAN! Stop Training", e));
  EXPECT_EQ(e.type, "ValueError");
  EXPECT_EQ(e.message, "Network outputs is NAN! Stop Training");
  ASSERT_TRUE(parse_exception_line("mylib.TrainingException:diverged", e));
  EXPECT_EQ(e.type, "TrainingException");
  // Without the space only a name that says it is an exception counts: step lines and notes are
  // written "Name:value" too.
  EXPECT_FALSE(parse_exception_line("Epoch:3 Loss:0.512", e));
  EXPECT_FALSE(parse_exception_line("Note:the run resumes from step 100", e));
  EXPECT_FALSE(parse_exception_line("Error:5", e));
}

TEST(Errno, TcpStoresBareStrerrorTextIsAPortThatIsTaken) {
  const Read r = read_one("RuntimeError: Address already in use");
  EXPECT_EQ(r.cls, "port-fail");
  EXPECT_EQ(r.vocabulary, "errno.EADDRINUSE");
}

TEST(Errno, AnEioWriteFailureIsAStorageError) {
  EXPECT_EQ(read_one("RuntimeError: write(): fd 29 failed with Input/output error").cls,
            "storage-error");
}

TEST(Errno, TheTextOutsideAnExceptionLineIsNotRead) {
  // A script's own prose that happens to use the words is no failure.
  EXPECT_EQ(read_one("copy finished, no Input/output error seen on /scratch").cls, "");
}

TEST(Errno, LibuvsLowerCaseTextAndNameAreReadToo) {
  EXPECT_EQ(read_one("torch.distributed.DistNetworkError: The server socket has failed to listen "
                     "on any local network address. port: 29500, useIpv6: false, code: -98, "
                     "name: EADDRINUSE, message: address already in use")
                .cls,
            "port-fail");
}

TEST(Cuda, BusyOrUnavailableDevicesAreNoUsableGpu) {
  const Read r =
      read_one("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable");
  EXPECT_EQ(r.cls, "no-gpu");
  EXPECT_EQ(r.vocabulary, "cuda.cudaErrorDevicesUnavailable");
}

TEST(Cuda, ADriverResultNameIsReadAsAWord) {
  EXPECT_EQ(read_one("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to allocate: "
                     "CUDA_ERROR_OUT_OF_MEMORY")
                .cls,
            "oom-gpu");
}

TEST(Hip, AHipResultNameNamesItsClass) {
  EXPECT_EQ(read_one("RuntimeError: HIP error: hipErrorNoBinaryForGpu").cls, "gpu-error");
}

TEST(Nccl, TheResultStringInTorchsNcclErrorIsTheCollectiveFailure) {
  const Read r = read_one(
      "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
      "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3");
  EXPECT_EQ(r.cls, "nccl-timeout");
  EXPECT_EQ(r.vocabulary, "nccl.ncclSystemError");
}

TEST(Nccl, TheInternalErrorStringSince219NamesTheCollectiveFailure) {
  const Read r = read_one(
      "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, internal "
      "error - please report this issue to the NCCL developers, NCCL version 2.19.3");
  EXPECT_EQ(r.cls, "nccl-timeout");
  EXPECT_EQ(r.vocabulary, "nccl.ncclInternalError");
}

TEST(Hip, RocmsNoDeviceStringIsNoUsableGpu) {
  const Read r = read_one("RuntimeError: HIP error: no ROCm-capable device is detected");
  EXPECT_EQ(r.cls, "no-gpu");
  EXPECT_EQ(r.vocabulary, "hip.hipErrorNoDevice");
}

TEST(SlurmLine, ALineIsSlurmsWhenItStartsWithTheProgramsName) {
  EXPECT_TRUE(is_slurm_line("srun: error: node07: task 3: Out Of Memory"));
  EXPECT_TRUE(is_slurm_line("slurmstepd: error: Exceeded job memory limit"));
  EXPECT_TRUE(is_slurm_line("slurmstepd-falkor7: error: Step 1141810.0 exceeded memory limit"));
  EXPECT_FALSE(is_slurm_line("srunner: error: Out Of Memory"));
  EXPECT_FALSE(is_slurm_line("slurmstepd-a b: error"));
  EXPECT_FALSE(is_slurm_line("[train] Out Of Memory in slurmstepd: retrying"));
}

TEST(Slurm, StepdsCancellationReasonNamesTheClass) {
  Read r = read_one(
      "slurmstepd: error: *** STEP 557341.0 ON c4-n12 CANCELLED AT "
      "2025-03-11T13:26:25 DUE TO PREEMPTION ***");
  EXPECT_EQ(r.cls, "preempted");
  r = read_one(
      "slurmstepd: error: *** JOB 3884617 ON node023 CANCELLED AT 2018-08-19T16:30:21 "
      "DUE TO TIME LIMIT ***");
  EXPECT_EQ(r.cls, "time-limit");
}

TEST(Slurm, MemoryEnforcementInBothWordingsIsHostMemory) {
  // 22.05's cgroup wording and 24.11's, and jobacct_gather's polling kill on a named node.
  EXPECT_EQ(read_one("slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. "
                     "Some of your processes may have been killed by the cgroup out-of-memory "
                     "handler.")
                .cls,
            "oom-host");
  EXPECT_EQ(read_one("slurmstepd: error: Detected 2 oom_kill events in StepId=77.13. Some of the "
                     "step tasks have been OOM Killed.")
                .cls,
            "oom-host");
  const Read r = read_one(
      "slurmstepd-falkor7: error: Step 1141810.0 exceeded memory limit (52917772 > 20971520), "
      "being killed");
  EXPECT_EQ(r.cls, "oom-host");
}

TEST(Slurm, SlurmsWordsInAProgramsOwnLineAreNotSlurms) {
  // A training script that prints the phrase is not slurmstepd: the message counts only in a
  // line a Slurm program printed.
  EXPECT_EQ(read_one("[watchdog] rank 3 exceeded memory limit set by --max-rss; continuing").cls,
            "");
}

TEST(Status, AStatusCodeCountsOnlyAsAStatus) {
  EXPECT_EQ(read_one("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory "
                     "while trying to allocate 12884901888 bytes.")
                .cls,
            "oom-gpu");
  // The name in prose (a flag, a doc string) is not a status.
  EXPECT_EQ(read_one("grpc retry policy: retryable=[DATA_LOSS, UNAVAILABLE] backoff=2").cls, "");
}

TEST(Torch, RendezvousAndStoreErrorsAreARendezvousFailure) {
  EXPECT_EQ(read_one("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError").cls,
            "rendezvous-fail");
  EXPECT_EQ(read_one("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for "
                     "clients. 1/2 clients joined.")
                .cls,
            "rendezvous-fail");
}

TEST(Torch, ProcessGroupNcclWithoutGpusIsNoGpu) {
  EXPECT_EQ(
      read_one("ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!").cls,
      "no-gpu");
}

TEST(Torch, TheModulePathTellsTorchsOutOfMemoryFromRays) {
  EXPECT_EQ(read_one("torch.cuda.OutOfMemoryError: Tried to allocate 20.00 MiB").cls, "oom-gpu");
  EXPECT_EQ(read_one("ray.exceptions.OutOfMemoryError: Task was killed due to the node running "
                     "low on memory.")
                .cls,
            "oom-host");
}

TEST(Ray, AnActorsDeathIsAnActorFailure) {
  EXPECT_EQ(read_one("ray.exceptions.ActorDiedError: The actor died unexpectedly before "
                     "finishing this task.")
                .cls,
            "actor-fail");
}

TEST(HuggingFace, TheTypeNamesAMissingModelWhateverItsMessage) {
  const Read r = read_one(
      "huggingface_hub.utils._errors.RepositoryNotFoundError: 404 Client "
      "Error. (Request ID: Root=1-65a0)");
  EXPECT_EQ(r.cls, "model-not-found");
  EXPECT_EQ(r.vocabulary, "huggingface.RepositoryNotFoundError");
  // The name inside another exception's message is not the type: the line is the ValueError.
  const Read v = read_one("ValueError: expected RepositoryNotFoundError to be raised");
  EXPECT_EQ(v.cls, "python-exception");
  EXPECT_EQ(v.vocabulary, "python.ValueError");
}

// Python's built-in exceptions name python-exception where no traceback stands before the line.
TEST(PythonBuiltins, ABuiltinExceptionLineIsAnExceptionWithoutItsTraceback) {
  const Read r = read_one("ValueError:Network outputs is NAN! Stop Training");
  EXPECT_EQ(r.cls, "python-exception");
  EXPECT_EQ(r.vocabulary, "python.ValueError");
  EXPECT_EQ(read_one("[rank2]: FloatingPointError: Loss became infinite or NaN at iteration=166!")
                .vocabulary,
            "python.FloatingPointError");
}

TEST(PythonBuiltins, AWarningThatNamesAnExceptionInProseIsNoFinding) {
  EXPECT_EQ(read_one("/site-packages/torch/nn/modules/module.py:1160: UserWarning: passing a "
                     "tensor of this shape will raise a ValueError in a future release")
                .cls,
            "");
  EXPECT_EQ(read_one("WARNING: caught ValueError: bad header in shard 12, skipping it").cls, "");
  // The name as part of a longer one, or as a module path's component, is not the type.
  EXPECT_EQ(read_one("MyValueError: x").cls, "");
  EXPECT_EQ(read_one("ValueErrorCount: 0").cls, "");
}

TEST(PythonBuiltins, AMoreSpecificClassOnTheSameLineStillWins) {
  // dataloader-fail's pattern, on a RuntimeError line: the generic class does not take it.
  EXPECT_EQ(
      read_one("RuntimeError: DataLoader worker (pid(s) 12048, 7612) exited unexpectedly").cls,
      "dataloader-fail");
  EXPECT_EQ(read_one("RuntimeError: Address already in use").cls, "port-fail");
}

// A chained traceback: the hub's error is the cause, the OSError transformers raised from it the
// consequence. The token's finding counts from its traceback's start and explains the traceback.
TEST(Chain, TheFirstExceptionOfADirectCauseChainIsTheFailure) {
  const std::string log =
      "Traceback (most recent call last):\n"
      "  File \"/site-packages/transformers/utils/hub.py\", line 398, in cached_file\n"
      "    resolved_file = hf_hub_download(\n"
      "huggingface_hub.utils._errors.RepositoryNotFoundError: 404 Client Error.\n"
      "\n"
      "The above exception was the direct cause of the following exception:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 10, in <module>\n"
      "    model = AutoModel.from_pretrained(\"org/model\")\n"
      "OSError: org/model is not a valid model identifier\n";
  const ScanResult r = test::scan_text(log);
  const SignatureCatalog& cat = test::shipped_catalog();
  const int mnf = cat.index_of("model-not-found");
  const int py = cat.index_of("python-exception");
  ASSERT_EQ(r.classes[static_cast<size_t>(mnf)].count, 1u);
  const Finding& token = r.classes[static_cast<size_t>(mnf)].first.front();
  EXPECT_EQ(token.line, 4);
  EXPECT_EQ(token.traceback_line, 1);
  ASSERT_GE(r.classes[static_cast<size_t>(py)].count, 1u);
  const Finding& tb = r.classes[static_cast<size_t>(py)].first.front();
  EXPECT_EQ(tb.line, 1);

  ClassOccurrence a{static_cast<uint32_t>(mnf), &token, 1, false, token.effective_line()};
  a.named_order = token.effective_line();
  ClassOccurrence b{static_cast<uint32_t>(py), &tb, 2, false, tb.effective_line()};
  const RankingResult rank = rank_failures(cat, {b, a}, false);
  EXPECT_EQ(rank.primary, 1);
  EXPECT_EQ(rank.explained_by[0], 1);
}

// Specific over generic, as data: a named class explains a `generic` one found at its line or
// later, but not one found before it.
TEST(Ranking, ANamedClassOutranksGenericClassesFromItsLineOn) {
  const SignatureCatalog& cat = test::shipped_catalog();
  const auto idx = [&](const char* id) { return static_cast<uint32_t>(cat.index_of(id)); };
  ASSERT_TRUE(cat.find("subprocess-fail")->generic);
  ASSERT_TRUE(cat.find("python-exception")->generic);
  ASSERT_FALSE(cat.find("rendezvous-fail")->generic);
  Finding named;
  named.line = 20;
  named.vocabulary = "torch.RendezvousTimeoutError";
  Finding later;
  later.line = 25;
  Finding earlier;
  earlier.line = 5;

  ClassOccurrence rdzv{idx("rendezvous-fail"), &named, 1, false, 20};
  rdzv.named_order = 20;
  // unknown-death: a catch-all rendezvous-fail's `explains` does not list, so only the token links
  // them.
  ClassOccurrence child{idx("unknown-death"), &later, 1, false, 25};
  ClassOccurrence tb{idx("unknown-death"), &earlier, 1, false, 5};
  const RankingResult r = rank_failures(cat, {tb, rdzv, child}, false);
  EXPECT_EQ(r.explained_by[2], 1);   // the later catch-all is the named class's consequence
  EXPECT_EQ(r.explained_by[0], -1);  // an earlier one is not
  EXPECT_EQ(r.primary, 1);

  // Without the token the same class found by a pattern explains nothing it does not list.
  ClassOccurrence unnamed{idx("rendezvous-fail"), &later, 1, false, 20};
  ClassOccurrence generic_later{idx("unknown-death"), &later, 1, false, 25};
  EXPECT_EQ(rank_failures(cat, {unnamed, generic_later}, false).explained_by[1], -1);
}

// The vocabulary files are checked like the catalog: file:line errors naming the problem.
std::string load_errors(const std::string& text) {
  RulesLoad rl = parse_rules_text(text, "site.rules");
  std::vector<InputError> errors = rl.errors;
  const SignatureCatalog cat = SignatureCatalog::from_sections(rl.sections, errors);
  std::string s;
  for (const auto& e : errors)
    s += std::string(e.what()) + "\n";
  for (const auto& e : check_signature_examples(cat))
    s += std::string(e.what()) + "\n";
  return s;
}

const char* const kPortClass =
    "[signature port-fail]\n"
    "pattern = Address already in use\n"
    "example = OSError: [Errno 98] Address already in use\n"
    "explain = x\n";

TEST(VocabularyCheck, AnEntryNamingNoClassOrNoSourceIsAnErrorAtItsLine) {
  const std::string errors = load_errors(std::string(kPortClass) +
                                         "[vocab-group site]\n"        // 5
                                         "read-in = exception-type\n"  // 6
                                         "example = port-fail | PortTakenError: 29500\n"
                                         "[vocab site.PortTakenError]\n"  // 8
                                         "token = PortTakenError\n"
                                         "class = port-busy\n"  // 10
                                         "[vocab other.X]\n"    // 11
                                         "token = XyzzyError\n"
                                         "class = port-fail\n");
  EXPECT_NE(errors.find("site.rules:5: [vocab-group site]: defined-in: missing"), std::string::npos)
      << errors;
  EXPECT_NE(errors.find("site.rules:10: [vocab site.PortTakenError]: class: unknown class "
                        "'port-busy'"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("site.rules:11: [vocab other.X]: a vocabulary entry's id is GROUP.NAME"),
            std::string::npos)
      << errors;
}

TEST(VocabularyCheck, AGroupsExampleMustBeReadThroughItsOwnTokens) {
  const std::string ok = load_errors(std::string(kPortClass) +
                                     "[vocab-group site]\n"
                                     "defined-in = site wiki, Errors page\n"
                                     "read-in = exception-type\n"
                                     "example = port-fail | PortTakenError: 29500\n"
                                     "[vocab site.PortTakenError]\n"
                                     "token = PortTakenError\n"
                                     "class = port-fail\n");
  EXPECT_EQ(ok, "");
  const std::string bad = load_errors(std::string(kPortClass) +
                                      "[vocab-group site]\n"
                                      "defined-in = site wiki, Errors page\n"
                                      "read-in = exception-type\n"
                                      "example = port-fail | RuntimeError: Address already in use\n"
                                      "[vocab site.PortTakenError]\n"
                                      "token = PortTakenError\n"
                                      "class = port-fail\n");
  EXPECT_NE(bad.find("site.rules:8: [vocab-group site]: example: read as port-fail but not "
                     "through this group's tokens (a pattern matched it)"),
            std::string::npos)
      << bad;
}

TEST(VocabularyCheck, EveryShippedEntryNamesWhereItIsDefined) {
  const Vocabulary& v = test::shipped_catalog().vocabulary();
  EXPECT_GE(v.groups.size(), 9u);
  for (const auto& g : v.groups)
    EXPECT_FALSE(g.examples.empty()) << g.id;
  for (const auto& e : v.entries)
    EXPECT_FALSE(e.defined_in.empty()) << e.id;
}

}  // namespace
}  // namespace triage
