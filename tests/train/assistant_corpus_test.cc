// The assistant's trainer driven like the K-module's (`mtpspec
// train-assistant`):
// - --corpus TEXT is tokenized by `mtpspec` into OUT/online/jobs.safetensors
//   (the online jobs `train --online` writes) and trained with --threads and
//   --batch; `train --drafter-arch gemma4-assistant --online --corpus` is the
//   same run (the same losses);
// - a self-distilled job's sequence is its prompt followed by the target's
//   own greedy continuation (checked against the target's logits), visited
//   in the K-module trainer's order;
// - no training text, two of them, or a bad thread count exit 2 naming the
//   flag; --help documents the flags.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "assistant_util.h"
#include "cli_util.h"
#include "core/json.h"
#include "gguf_util.h"
#include "io/gguf.h"
#include "io/pretrain_data.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"
#include "train/assistant_train.h"
#include "train/data.h"

namespace mtp::train {
namespace {

namespace fs = std::filesystem;
using test::shell_quote;

struct CorpusFixture {
  test::RandomSpec t = test::assistant_target_spec(384);
  std::string target = test::random_hf_checkpoint("g4a-corpus-t", t);
  std::string tokenizer, corpus;
  CorpusFixture() {
    tokenizer = test::temp_dir("g4a-corpus-tok") + "/tokenizer.gguf";
    io::GgufMetadata kv;
    kv.push_back({"general.architecture", io::GgufValue::str("llama")});
    test::add_test_vocab(kv, 384);
    io::write_gguf(tokenizer, kv, {});
    corpus = test::temp_dir("g4a-corpus-text") + "/corpus.txt";
    std::ofstream out(corpus);
    for (int i = 0; i < 12; ++i) {
      out << "a bad cab " << i << " fed a deaf bee, and the bee ate " << i * 7
          << " beads.\n\n";
    }
  }
  // The trainer's flags (and --tokenizer, which `mtpspec` takes for --corpus).
  std::string base(const std::string& out, bool tokenizer_flag = true) const {
    return " -m " + shell_quote(target) +
           (tokenizer_flag ? " --tokenizer " + shell_quote(tokenizer) : std::string()) + " -o " +
           shell_quote(out) + " --k 2 --steps 3 --batch 2 --lr 1e-2 --assistant-layers 1";
  }
};

TEST(AssistantCorpus, CorpusIsTokenizedIntoJobsAndTrainsWithThreads) {
  const CorpusFixture f;
  const std::string out = test::temp_dir("g4a-corpus-out") + "/assistant";
  const std::string capture = " --corpus " + shell_quote(f.corpus) + " --seq-len 16";
  const test::CliResult r = test::run_cli("train-assistant" + f.base(out) + capture + " --threads 1");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = parse_json(r.out.substr(r.out.rfind("{\"")), "stdout");
  EXPECT_EQ(j.at("losses").size(), 3u);
  EXPECT_EQ(j.at("parity"), true);
  const nlohmann::json info = io::read_pretrain_info(out + "/online/jobs.safetensors");
  EXPECT_EQ(info.value("kind", ""), "online-capture");
  EXPECT_EQ(info["capture"]["seq_len"], 16);
  // The same run through `train --drafter-arch gemma4-assistant --online`.
  const std::string out2 = test::temp_dir("g4a-corpus-out2") + "/assistant";
  const test::CliResult r2 = test::run_cli("train --drafter-arch gemma4-assistant --online" +
                                           f.base(out2) + capture + " --threads 1");
  ASSERT_EQ(r2.status, 0) << r2.err;
  const nlohmann::json j2 = parse_json(r2.out.substr(r2.out.rfind("{\"")), "stdout");
  EXPECT_EQ(j2.at("losses"), j.at("losses"));
}

TEST(AssistantCorpus, SelfDistilledSequencesAreTheTargetsGreedyContinuation) {
  const CorpusFixture f;
  const std::string out = test::temp_dir("g4a-corpus-sd") + "/assistant";
  const test::CliResult w = test::run_cli(
      "train-assistant --jobs-only" + f.base(out) + " --corpus " + shell_quote(f.corpus) +
      " --seq-len 16 --self-distill --prompt-tokens 5 --gen-tokens 8");
  ASSERT_EQ(w.status, 0) << w.err;
  ASSERT_NE(w.out.find("mtpspec-train train-assistant --online-jobs"), std::string::npos) << w.out;
  AssistantTrainOptions o;
  o.target = f.target;
  o.online_jobs = out + "/online/jobs.safetensors";
  o.steps = 3;
  o.batch = 2;
  o.seed = 4;
  o.threads = 1;
  const model::LoadedModel lm = model::load_model(f.target, {});
  const model::Model m(model::load_model(f.target, {}));
  const auto seqs = assistant_sequences(o, m);
  const io::PretrainData jobs = io::read_pretrain_data(o.online_jobs);
  const io::TokenStream& st = jobs.train;
  const size_t n_jobs = st.starts.size();
  DataOrder order(n_jobs, o.seed);
  ASSERT_EQ(seqs.size(), 3u);
  long decided = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    ASSERT_EQ(seqs[s].size(), 2u);
    for (size_t b = 0; b < 2; ++b) {
      const size_t job = order.at(s * 2 + b);
      const size_t lo = size_t(st.starts[job]);
      const size_t hi = job + 1 < n_jobs ? size_t(st.starts[job + 1]) : st.tokens.size();
      const std::vector<int32_t> prompt(st.tokens.begin() + long(lo), st.tokens.begin() + long(hi));
      const std::vector<int32_t>& seq = seqs[s][b];
      ASSERT_EQ(seq.size(), std::min<size_t>(16, prompt.size() + 8)) << "step " << s;
      ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), seq.begin()));
      const std::vector<float> logits = test::logits_of(lm, seq, {16});
      const size_t V = size_t(f.t.vocab);
      for (size_t p = prompt.size(); p < seq.size(); ++p) {
        const float* row = logits.data() + (p - 1) * V;
        size_t best = 0;
        for (size_t v = 1; v < V; ++v) best = row[v] > row[best] ? v : best;
        float second = -1e30f;
        for (size_t v = 0; v < V; ++v) second = v != best ? std::max(second, row[v]) : second;
        if (row[best] - second < 1e-3f) continue;  // a near tie: either is greedy
        ++decided;
        EXPECT_EQ(seq[p], int32_t(best)) << "step " << s << " sequence " << b << " position " << p;
      }
    }
  }
  EXPECT_GT(decided, 30);
}

TEST(AssistantCorpus, BadTrainingTextOrThreadsExitTwoNamingTheFlag) {
  const CorpusFixture f;
  const std::string out = test::temp_dir("g4a-corpus-bad") + "/assistant";
  const std::string corpus = " --corpus " + shell_quote(f.corpus) + " --seq-len 16";
  const test::CliResult none = test::run_cli("train-assistant" + f.base(out, false));
  EXPECT_EQ(none.status, 2) << none.err;
  EXPECT_NE(none.err.find("--tokens"), std::string::npos) << none.err;
  const test::CliResult both = test::run_cli("train-assistant" + f.base(out) + corpus +
                                             " --tokens " + shell_quote(f.corpus));
  EXPECT_EQ(both.status, 2) << both.err;
  EXPECT_NE(both.err.find("--tokens"), std::string::npos) << both.err;
  for (const char* bad : {" --threads -1", " --threads 100000", " --threads x"}) {
    const test::CliResult r = test::run_cli("train-assistant" + f.base(out) + corpus + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << bad << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  const test::CliResult help = test::run_cli("train-assistant --help");
  ASSERT_EQ(help.status, 0) << help.err;
  for (const char* flag : {"--corpus", "--threads", "--batch", "--online-jobs", "--self-distill"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace mtp::train
