// The MPI and UCX vocabularies (rules/vocab-mpi.rules, rules/vocab-ucx.rules): an MPI program that
// cannot start under srun, or loses its InfiniBand transport, is read through the words Open MPI,
// PMIx and UCX print for it, and the harmless chatter the same programs print is not.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyzer/vocabulary.h"
#include "line_reading.h"
#include "test_support.h"

namespace triage {
namespace {

using test::finds_anything;
using test::Read;
using test::read_line;

// What `slurm-triage analyze` concludes from `log` as a job's whole output.
nlohmann::json analyze(const std::string& log) {
  test::ScratchDir dir("mpi-ucx-vocab");
  test::write_file(dir / "job.log", log);
  const auto r = test::run_cli({"analyze", "--slurm-state", "none", "--now", "1795341600",
                                "--format", "json", (dir / "job.log").string()});
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  return nlohmann::json::parse(r.out);
}

// An srun-launched Open MPI 4 program whose Open MPI was built without Slurm's PMI: every task
// prints OPAL's error-log line and then the ess help text, and srun reports the tasks' exits.
const char* const kSrunWithoutPmi =
    "[cn07:31337] OPAL ERROR: Not initialized in file pmix3x_client.c at line 112\n"
    "--------------------------------------------------------------------------\n"
    "The application appears to have been direct launched using \"srun\",\n"
    "but OMPI was not built with SLURM's PMI support and therefore cannot\n"
    "execute. There are several options for building PMI support under\n"
    "SLURM, depending upon the SLURM version you are using:\n"
    "--------------------------------------------------------------------------\n"
    "*** An error occurred in MPI_Init\n"
    "*** on a NULL communicator\n"
    "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
    "***    and potentially your MPI job)\n";

TEST(MpiStartup, AnSrunLaunchedOpenMpiBuiltWithoutPmiIsATaskThatCouldNotStart) {
  const Read help = read_line(kSrunWithoutPmi, 4);
  EXPECT_EQ(help.cls, "subprocess-fail");
  EXPECT_EQ(help.vocabulary, "ompi-help.slurm-error");
  const Read opal = read_line(kSrunWithoutPmi, 1);
  EXPECT_EQ(opal.cls, "subprocess-fail");
  EXPECT_EQ(opal.vocabulary, "ompi-error.opal-not-initialized");
  EXPECT_EQ(read_line(kSrunWithoutPmi, 8).vocabulary, "ompi-error.mpi-init");

  // Not a death without a summary: the help text says what happened, and whose choice it was
  // (the job launched with srun an Open MPI that cannot be launched that way).
  const auto j = analyze(kSrunWithoutPmi);
  EXPECT_EQ(j.at("primary_failure"), "subprocess-fail") << j.dump();
  EXPECT_NE(j.dump().find("user-config"), std::string::npos) << j.dump();
}

TEST(MpiStartup, OpenMpisInformationalWarningsAreNotAFailure) {
  // btl_openib's start-up warning on a node without active IB ports, and a component declining:
  // Open MPI carries on over another transport.
  const std::string chatter =
      "--------------------------------------------------------------------------\n"
      "WARNING: There is at least non-excluded one OpenFabrics device found,\n"
      "but there are no active ports detected (or Open MPI was unable to use\n"
      "them).  This is most certainly not what you wanted.  Check your\n"
      "cables, subnet manager configuration, etc.  The openib BTL will be\n"
      "ignored for this job.\n"
      "  Local host: cn07\n"
      "--------------------------------------------------------------------------\n"
      "[cn07:31337] 3 more processes have sent help message help-mpi-btl-openib.txt / no active "
      "ports found\n"
      "[cn07:31337] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error "
      "messages\n";
  EXPECT_FALSE(finds_anything(chatter));
}

TEST(MpiStartup, MpirunLosingADaemonIsReadFromItsHelpTextEvenIndented) {
  EXPECT_EQ(read_line("ORTE has lost communication with a remote daemon.\n", 1).vocabulary,
            "ompi-help.orte-node-died");
  EXPECT_EQ(read_line("  PRTE has lost communication with a remote daemon.\n", 1).vocabulary,
            "ompi-help.prte-node-died");
  // The same words inside a sentence of the program's own are not the help text.
  EXPECT_EQ(read_line("checkpoint: ORTE has lost communication with a remote daemon.\n", 1).cls,
            "");
}

// A UCX transport retry exceeded on InfiniBand between two nodes: UCX's logger prints the
// completion error at ERROR level, then the QP that failed.
const char* const kRetryExceeded =
    "[1732845600.123456] [cn07:31337:0]   ib_mlx5_log.c:143  UCX  ERROR Transport retry count "
    "exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)\n"
    "[1732845600.123456] [cn07:31337:0]   ib_mlx5_log.c:143  UCX  ERROR RC QP 0x1a2b wqe[12]: "
    "SEND --e [inl len 60]\n";

TEST(Ucx, ATransportRetryExceededOnInfinibandBetweenTwoNodesEndsTheTask) {
  const Read r = read_line(kRetryExceeded, 1);
  EXPECT_EQ(r.cls, "subprocess-fail");
  EXPECT_EQ(r.vocabulary, "ucx-ib.transport-retry");
  // Whose fault the retry count does not say (a link, or a peer that died first).
  const auto j = analyze(kRetryExceeded);
  EXPECT_EQ(j.at("primary_failure"), "subprocess-fail") << j.dump();
}

TEST(Ucx, TheFatalHandlersLinesWithoutALevelAreUcxsToo) {
  EXPECT_EQ(read_line("[cn07:31337:0:31337] ib_mlx5_log.c:177  Transport retry count exceeded on "
                      "mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)\n",
                      1)
                .vocabulary,
            "ucx-ib.transport-retry");
  EXPECT_EQ(read_line("[cn07:31337:0:31337] Caught signal 11 (Segmentation fault: address not "
                      "mapped to object at address 0x8)\n",
                      1)
                .cls,
            "signal-kill");
}

TEST(Ucx, UcxsWarningChatterIsNotRead) {
  // An unused UCX_ variable, and a WARN line that happens to carry a status string.
  const std::string chatter =
      "[1732845600.123456] [cn07:31337:0]          parser.c:1989 UCX  WARN  unused environment "
      "variable: UCX_IB_RETRY_COUNT (maybe: UCX_RC_RETRY_COUNT?)\n"
      "[1732845600.123456] [cn07:31337:0]          parser.c:1989 UCX  WARN  (set "
      "UCX_WARN_UNUSED_ENV_VARS=n to suppress this warning)\n"
      "[1732845600.223456] [cn07:31337:0]      ib_device.c:1077 UCX  WARN  device mlx5_1: "
      "Operation timed out\n";
  EXPECT_FALSE(finds_anything(chatter));
  // The same completion text outside any UCX line is the program's own prose.
  EXPECT_FALSE(finds_anything("note: Transport retry count exceeded is a known fabric issue\n"));
}

TEST(Ucx, OpenMpisUcxPmlPrintsUcxsStatusInItsOwnErrorLine) {
  const Read r = read_line(
      "[cn07:31337] pml_ucx.c:419  Error: ucp_ep_create(proc=12) failed: Destination is "
      "unreachable\n",
      1);
  EXPECT_EQ(r.vocabulary, "ucs.UCS_ERR_UNREACHABLE");
  EXPECT_EQ(
      read_line("[cn07:31337] pml_ucx.c:309  Error: Failed to create UCP worker\n", 1).vocabulary,
      "ompi-error.ucp-worker");
}

TEST(UcxLine, OnlyErrorAndFatalLevelsAndTheFatalHandlersShapesAreUcxErrorLines) {
  EXPECT_TRUE(is_ucx_error_line("[1.2] [h:1:0]  ib_iface.c:623  UCX  ERROR failed"));
  EXPECT_TRUE(is_ucx_error_line("[1.2] [h:1:0]  debug.c:1 UCX  FATAL x"));
  EXPECT_FALSE(is_ucx_error_line("[1.2] [h:1:0]  parser.c:1989 UCX  WARN  unused"));
  EXPECT_TRUE(is_ucx_error_line("[h:1:0:1] ib_mlx5_log.c:139  DCI QP 0xa9f"));
  EXPECT_TRUE(is_ucx_error_line("ib_mlx5_log.c:132  RC QP 0x3340"));
  EXPECT_FALSE(is_ucx_error_line("[h:1] something.c happened"));
  EXPECT_FALSE(is_ucx_error_line("Transport retry count exceeded"));
}

TEST(MpiLine, ErrorLogMarkersAndTheErrorHandlersBannerAreOpenMpiLines) {
  EXPECT_TRUE(is_mpi_line("[cn07:1] OPAL ERROR: Unreachable in file x.c at line 1"));
  EXPECT_TRUE(is_mpi_line("[cn07:1] [[123,0],0] ORTE_ERROR_LOG: Not found in file x.c"));
  EXPECT_TRUE(is_mpi_line("[cn07:1] PMIX ERROR: UNREACHABLE in file x.c at line 1"));
  EXPECT_TRUE(is_mpi_line("[cn07:1] *** An error occurred in MPI_Init"));
  EXPECT_TRUE(is_mpi_line("[cn07:1] pml_ucx.c:309  Error: Failed to create UCP worker"));
  EXPECT_FALSE(is_mpi_line("Error: Failed to create UCP worker"));
  EXPECT_FALSE(is_mpi_line("step 10 *** loss 2.3"));
}

}  // namespace
}  // namespace triage
