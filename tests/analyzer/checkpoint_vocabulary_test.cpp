// The checkpoint and loss-scale vocabularies (rules/vocab-torch.rules' serialization entries,
// rules/vocab-safetensors.rules, rules/vocab-huggingface.rules' transformers group,
// rules/vocab-deepspeed.rules): a checkpoint that cannot be read or written, and an fp16 run whose
// loss scale hit its floor, are read through the words torch, safetensors, transformers and
// DeepSpeed raise, and the healthy lines the same programs print are not.
#include <gtest/gtest.h>

#include "analyzer/vocabulary.h"
#include "line_reading.h"
#include "test_support.h"

namespace triage {
namespace {

using test::finds_anything;
using test::Read;
using test::read_line;

TEST(CheckpointVocabulary, ASafetensorsFileWhoseHeaderIsNotOneIsTheLoadsExceptionNotStorage) {
  // A .safetensors name on a file of another format: the first 8 bytes read as a huge length.
  const Read r = read_line(
      "loading adapter weights\n"
      "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge\n",
      2);
  EXPECT_EQ(r.cls, "python-exception");
  EXPECT_EQ(r.vocabulary, "safetensors.SafetensorError");
}

TEST(CheckpointVocabulary, SavingASafetensorsFileIsNotAFinding) {
  EXPECT_FALSE(
      finds_anything("Saving model checkpoint to out/checkpoint-500\n"
                     "Model weights saved in out/checkpoint-500/model.safetensors\n"));
}

TEST(CheckpointVocabulary, ATransformersShardThatTorchCannotReadIsTheLoadsException) {
  const Read r = read_line(
      "OSError: Unable to load weights from pytorch checkpoint file for "
      "'pytorch_model-00039-of-00061.bin' at 'pytorch_model-00039-of-00061.bin'. If you tried to "
      "load a PyTorch model from a TF 2.0 checkpoint, please set from_tf=True.\n",
      1);
  EXPECT_EQ(r.cls, "python-exception");
  EXPECT_EQ(r.vocabulary, "transformers.unable-to-load-weights");
}

TEST(CheckpointVocabulary, ATorchSaveWhoseZipWriterLostItsPlaceIsAStorageError) {
  // An earlier short write leaves the writer's offset behind the file's: the file system failed.
  const Read r = read_line(
      "RuntimeError: [enforce fail at inline_container.cc:664] . unexpected pos 56833600 vs "
      "56833492\n",
      1);
  EXPECT_EQ(r.cls, "storage-error");
  EXPECT_EQ(r.vocabulary, "torch.PytorchStreamWriter-unexpected-pos");
}

// torch.save's writer failing, under the prefixes a distributed run prints it with: torch's own
// "[rank0]: " (the traceback reader must see the exception line under it) and a Ray actor's.
TEST(CheckpointVocabulary, ATorchSaveThatCouldNotWriteIsAStorageErrorUnderAnyPrefix) {
  const std::string traceback =
      "[rank0]: Traceback (most recent call last):\n"
      "[rank0]:   File \"/opt/conda/lib/python3.10/site-packages/torch/serialization.py\", line "
      "866, in _save\n"
      "[rank0]:     zip_file.write_record('data.pkl', data_value, len(data_value))\n"
      "[rank0]: RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter "
      "failed writing file data.pkl: file write failed\n";
  const Read r = read_line(traceback, 4);
  EXPECT_EQ(r.cls, "storage-error");
  EXPECT_EQ(r.vocabulary, "torch.PytorchStreamWriter-write-failed");

  const Read ray = read_line(
      "(ActorModelRayActorBOX pid=499400)     zip_file.write_record(name, storage, num_bytes)\n"
      "(ActorModelRayActorBOX pid=499400) RuntimeError: [enforce fail at inline_container.cc:778] "
      ". PytorchStreamWriter failed writing file data/0: file write failed\n",
      2);
  EXPECT_EQ(ray.cls, "storage-error");
  EXPECT_EQ(ray.vocabulary, "torch.PytorchStreamWriter-write-failed");
}

TEST(CheckpointVocabulary, TheWritersNameInAProgressLineIsNotAFinding) {
  EXPECT_FALSE(finds_anything(
      "[rank0]: INFO saving with PytorchStreamWriter failed writing file count = 0\n"
      "(Trainer pid=12) checkpoint saved; PytorchStreamWriter failed writing file: no\n"));
}

TEST(CheckpointVocabulary, ATorch7DiskFileShortWriteIsAStorageError) {
  // torch7 lib/TH/THDiskFile.c: fwrite came back short; luajit prints THError's message.
  const Read r = read_line(
      "saving checkpoint to cv/lm_lstm_epoch0.10_1.2833.t7\n"
      "/home/u/torch/install/bin/luajit: /home/u/torch/install/share/lua/5.1/torch/File.lua:210: "
      "write error: wrote 39776036 blocks instead of 41251350 at "
      "/tmp/luarocks_torch-scm-1-1419/torch7/lib/TH/THDiskFile.c:340\n",
      2);
  EXPECT_EQ(r.cls, "storage-error");
}

TEST(CheckpointVocabulary, ATorch7ShortReadIsNotAWriteFailure) {
  // A short read is a truncated file, not a file system that refused a write.
  EXPECT_NE(read_line("luajit: File.lua:351: read error: read 0 blocks instead of 1 at "
                      "torch7/lib/TH/THDiskFile.c:310\n",
                      1)
                .cls,
            "storage-error");
}

TEST(CheckpointVocabulary, ATruncatedCheckpointQuotedInCodeMarksIsTheLoadsException) {
  // The type (python.RuntimeError) and the message (torch.unexpected-eof-corrupted) both name
  // the class; the line is read as an exception line despite the opening mark.
  const Read r = read_line(
      "`RuntimeError: unexpected EOF, expected 8 more bytes. The file might be corrupted.`\n", 1);
  EXPECT_EQ(r.cls, "python-exception");
  EXPECT_FALSE(r.vocabulary.empty());
}

TEST(CheckpointVocabulary, UnexpectedPosOutsideAnExceptionIsNotAFinding) {
  EXPECT_FALSE(finds_anything("reader: unexpected pos in stream, seeking back\n"));
}

TEST(CheckpointVocabulary, ADeepSpeedFp16RunWhoseLossScaleHitItsMinimumStops) {
  const Read r = read_line(
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1\n"
      "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting "
      "run.\n",
      2);
  EXPECT_EQ(r.cls, "python-exception");
  EXPECT_EQ(r.vocabulary, "deepspeed.loss-scale-at-minimum");
}

TEST(CheckpointVocabulary, AHealthyDeepSpeedRunReducingItsLossScaleIsNotAFinding) {
  EXPECT_FALSE(finds_anything(
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to "
      "32768\n"
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32768, reducing to "
      "16384\n"
      "steps: 20 loss: 2.3141 iter time (s): 0.412 samples/sec: 77.6\n"));
}

}  // namespace
}  // namespace triage
