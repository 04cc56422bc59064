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
