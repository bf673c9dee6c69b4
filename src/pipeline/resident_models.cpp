// ResidentModels: one slot per model, keyed by the files and settings it was loaded with.
#include "pipeline/resident_models.h"

#include "core/error.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/vae_checkpoint.h"
#include "pipeline/text_to_video.h"

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
  std::lock_guard lock(keys_mutex_);
  tokenizer_ = {};
  t5_ = {};
  dit_ = {};
  vae_ = {};
}

const wan::Tokenizer& ResidentModels::tokenizer(const std::string& path) {
  if (!tokenizer_.model || tokenizer_.key != path) {
    {
      std::lock_guard lock(keys_mutex_);
      tokenizer_.key.clear();
    }
    tokenizer_.model.reset();
    tokenizer_.model = std::make_unique<wan::Tokenizer>(wan::Tokenizer::open(path));
    {
      std::lock_guard lock(keys_mutex_);
      tokenizer_.key = path;
    }
    ++loads_;
  }
  return *tokenizer_.model;
}

wan::T5Encoder& ResidentModels::t5(const std::string& path, wan::Precision precision,
                                   const ExecContext& ctx) {
  const std::string key = str_cat(path, "|", precision_key(precision), "|", context_key(ctx));
  if (!t5_.model || t5_.key != key) {
    {
      std::lock_guard lock(keys_mutex_);
      t5_.key.clear();
    }
    t5_.model.reset();  // the old weights go before the new ones load
    const auto ck = wan::T5Checkpoint::open(path);
    t5_.model = std::make_unique<wan::T5Encoder>(ck.config(), ck.loader(), precision, ctx);
    ck.source().release_resident_pages();
    {
      std::lock_guard lock(keys_mutex_);
      t5_.key = key;
    }
    ++loads_;
  }
  return *t5_.model;
}

wan::WanDit& ResidentModels::dit(const std::string& path, wan::Precision precision,
                                 const ExecContext& ctx, int64_t weights_budget, bool keep_fp8,
                                 bool sharded, bool keep_fp16) {
  const std::string key = str_cat(path, "|", precision_key(precision), "|", context_key(ctx),
                                  "|budget=", weights_budget, "|fp8=", keep_fp8,
                                  "|fp16=", keep_fp16, "|sharded=", sharded);
  if (!dit_.model || dit_.key != key) {
    {
      std::lock_guard lock(keys_mutex_);
      dit_.key.clear();
    }
    dit_.model.reset();
    const auto ck = std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(path));
    dit_.model = std::make_unique<wan::WanDit>(
        wan::open_dit(ck, precision, ctx, weights_budget, keep_fp8, sharded, keep_fp16));
    {
      std::lock_guard lock(keys_mutex_);
      dit_.key = key;
    }
    ++loads_;
  }
  return *dit_.model;
}

wan::WanVae& ResidentModels::vae_decoder(const std::string& path, wan::Precision precision) {
  const std::string key = str_cat(path, "|", precision_key(precision));
  if (!vae_.model || vae_.key != key) {
    {
      std::lock_guard lock(keys_mutex_);
      vae_.key.clear();
    }
    vae_.model.reset();
    const auto ck = wan::VaeCheckpoint::open(path);
    vae_.model =
        std::make_unique<wan::WanVae>(ck.config(), ck.loader(), precision, wan::VaeParts::kDecoder);
    ck.source().release_resident_pages();
    {
      std::lock_guard lock(keys_mutex_);
      vae_.key = key;
    }
    ++loads_;
  }
  return *vae_.model;
}

bool ResidentModels::holds(const std::string& phase, const std::string& path) const {
  std::lock_guard lock(keys_mutex_);
  auto from = [&](const std::string& key) { return key == path || key.rfind(path + "|", 0) == 0; };
  if (phase == "encode text") return from(t5_.key);
  if (phase == "denoise") return from(dit_.key);
  if (phase == "decode") return from(vae_.key);
  return false;
}

void require_fits_resident(const GenerationPlan& plan, const ResidentModels& resident,
                           double available) {
  PhaseMemory together{"every model loaded together", 0, 0};
  for (const PhaseMemory& p : plan.memory.phases) {
    const std::string& path = p.phase == "encode text" ? plan.files.t5
                              : p.phase == "denoise"   ? plan.files.dit
                                                       : plan.files.vae;
    const bool kept = p.phase == "encode text" || p.phase == "decode" ||
                      (p.phase == "denoise" && !plan.two_experts);
    if (!(kept && resident.holds(p.phase, path))) together.weight_bytes += p.weight_bytes;
    together.activation_bytes = std::max(together.activation_bytes, p.activation_bytes);
  }
  MemoryPlan check;
  check.phases = {together};
  check.resident_bytes = plan.memory.resident_bytes;
  require_fits(check, available);
}

}  // namespace vidax
