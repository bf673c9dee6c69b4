// ResidentModels: one slot per model, keyed by the files and settings it was loaded with.
#include "pipeline/resident_models.h"

#include "core/error.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/vae_checkpoint.h"

namespace vidax {
namespace {

std::string precision_key(wan::Precision p) { return p == wan::Precision::kBF16 ? "bf16" : "fp32"; }

// The mesh is not part of the key: callers keep one ExecContext for the life of the models.
std::string context_key(const ExecContext& ctx) {
  return str_cat("threads=", ctx.threads, ",mesh=", ctx.mesh != nullptr ? 1 : 0);
}

}  // namespace

ResidentModels::ResidentModels() = default;
ResidentModels::~ResidentModels() = default;

void ResidentModels::clear() {
  tokenizer_ = {};
  t5_ = {};
  dit_ = {};
  vae_ = {};
}

const wan::Tokenizer& ResidentModels::tokenizer(const std::string& path) {
  if (!tokenizer_.model || tokenizer_.key != path) {
    tokenizer_.model.reset();
    tokenizer_.model = std::make_unique<wan::Tokenizer>(wan::Tokenizer::open(path));
    tokenizer_.key = path;
    ++loads_;
  }
  return *tokenizer_.model;
}

wan::T5Encoder& ResidentModels::t5(const std::string& path, wan::Precision precision,
                                   const ExecContext& ctx) {
  const std::string key = str_cat(path, "|", precision_key(precision), "|", context_key(ctx));
  if (!t5_.model || t5_.key != key) {
    t5_.model.reset();  // the old weights go before the new ones load
    const auto ck = wan::T5Checkpoint::open(path);
    t5_.model = std::make_unique<wan::T5Encoder>(ck.config(), ck.loader(), precision, ctx);
    ck.source().release_resident_pages();
    t5_.key = key;
    ++loads_;
  }
  return *t5_.model;
}

wan::WanDit& ResidentModels::dit(const std::string& path, wan::Precision precision,
                                 const ExecContext& ctx, int64_t weights_budget, bool keep_fp8) {
  const std::string key = str_cat(path, "|", precision_key(precision), "|", context_key(ctx),
                                  "|budget=", weights_budget, "|fp8=", keep_fp8);
  if (!dit_.model || dit_.key != key) {
    dit_.model.reset();
    const auto ck = std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(path));
    dit_.model =
        std::make_unique<wan::WanDit>(wan::open_dit(ck, precision, ctx, weights_budget, keep_fp8));
    dit_.key = key;
    ++loads_;
  }
  return *dit_.model;
}

wan::WanVae& ResidentModels::vae_decoder(const std::string& path, wan::Precision precision) {
  const std::string key = str_cat(path, "|", precision_key(precision));
  if (!vae_.model || vae_.key != key) {
    vae_.model.reset();
    const auto ck = wan::VaeCheckpoint::open(path);
    vae_.model =
        std::make_unique<wan::WanVae>(ck.config(), ck.loader(), precision, wan::VaeParts::kDecoder);
    ck.source().release_resident_pages();
    vae_.key = key;
    ++loads_;
  }
  return *vae_.model;
}

}  // namespace vidax
