// Configuration spec strings: parsing on top of defaults, the canonical text, errors that name
// the key, and what a configuration sets in GenerateOptions.
#include "eval/config_spec.h"

#include "core/error.h"
#include "support/test_support.h"

namespace vidax::eval {
namespace {

std::string error_of(const std::string& spec) {
  try {
    parse_config_spec(spec, tiny_defaults(), "--config");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigSpec, DefaultIsTheModelsDefaults) {
  EXPECT_EQ(parse_config_spec("default", tiny_defaults(), "--config"), tiny_defaults());
  EXPECT_EQ(tiny_defaults().canonical(),
            "frames=17,guide=5,precision=fp32,sampler=unipc,shift=5,size=256x256,steps=20,"
            "attention=dense");
  EXPECT_EQ(wan21_defaults().canonical(),
            "frames=81,guide=5,precision=bf16,sampler=unipc,shift=5,size=832x480,steps=50,"
            "attention=dense");
}

// An --attention spec has commas of its own: `attention` takes the rest of the spec, and the
// canonical text (what the cache is keyed on) is the policy's canonical name, last.
TEST(ConfigSpec, AttentionTakesTheRestOfTheSpec) {
  const EvalConfig c =
      parse_config_spec("steps=8,attention=window:3,8,8:tile=1,8,8", tiny_defaults(), "--config");
  EXPECT_EQ(c.steps, 8);
  EXPECT_NE(c.attention.find("window:3,8,8"), std::string::npos) << c.attention;
  const std::string tail = ",attention=" + c.attention;
  ASSERT_GT(c.canonical().size(), tail.size());
  EXPECT_EQ(c.canonical().substr(c.canonical().size() - tail.size()), tail) << c.canonical();
  EXPECT_EQ(parse_config_spec(c.canonical(), tiny_defaults(), "--config"), c);
  EXPECT_NE(error_of("attention=window:0,8,8").find("--config attention"), std::string::npos);
}

// A step-method spec has commas too: `accel` runs up to `attention` (or the end), in either
// order, and a configuration without one keeps the canonical text it had before the key.
TEST(ConfigSpec, AccelAndAttentionSplitTheRestOfTheSpec) {
  const EvalConfig a =
      parse_config_spec("steps=8,accel=magcache:thresh=0.24,k=6,attention=window:3,8,8:tile=1,8,8",
                        tiny_defaults(), "--config");
  EXPECT_EQ(a.accel, "magcache:thresh=0.24,k=6");
  EXPECT_NE(a.attention.find("window:3,8,8"), std::string::npos) << a.attention;
  const EvalConfig b =
      parse_config_spec("attention=window:3,8,8:tile=1,8,8,accel=magcache:thresh=0.24,k=6,steps=8",
                        tiny_defaults(), "--config");
  EXPECT_EQ(b.accel, "magcache:thresh=0.24,k=6,steps=8");  // accel takes the rest
  EXPECT_EQ(b.steps, tiny_defaults().steps);
  EXPECT_NE(a.canonical().find(",accel=magcache:thresh=0.24,k=6,attention="), std::string::npos)
      << a.canonical();
  EXPECT_EQ(parse_config_spec(a.canonical(), tiny_defaults(), "--config"), a);
  EXPECT_EQ(tiny_defaults().canonical().find("accel"), std::string::npos);
  EXPECT_EQ(
      parse_config_spec("sampler=euler,accel=hsa:budget=0.5,warmup=2", tiny_defaults(), "--config")
          .accel,
      "hsa:budget=0.5,warmup=2");
  EXPECT_NE(error_of("accel=turbo").find("--config accel: unknown step method 'turbo'"),
            std::string::npos)
      << error_of("accel=turbo");
}

TEST(ConfigSpec, KeysOverrideDefaults) {
  const EvalConfig c = parse_config_spec(
      " steps=8 , shift=3.5,guide=0,sampler=euler,precision=bf16,size=128x64,frames=9,"
      "attention=dense",
      tiny_defaults(), "--config");
  EXPECT_EQ(c.steps, 8);
  EXPECT_DOUBLE_EQ(c.shift, 3.5);
  EXPECT_DOUBLE_EQ(c.guide, 0.0);
  EXPECT_EQ(c.sampler, "euler");
  EXPECT_EQ(c.precision, "bf16");
  EXPECT_EQ(c.width, 128);
  EXPECT_EQ(c.height, 64);
  EXPECT_EQ(c.frames, 9);
  EXPECT_EQ(c.canonical(),
            "frames=9,guide=0,precision=bf16,sampler=euler,shift=3.5,size=128x64,steps=8,"
            "attention=dense");
  // A leading "default" changes nothing; the canonical text reads back to the same config.
  EXPECT_EQ(parse_config_spec("default,steps=8,shift=3.5,guide=0,sampler=euler,precision=bf16,"
                              "size=128x64,frames=9",
                              tiny_defaults(), "--config"),
            c);
  EXPECT_EQ(parse_config_spec(c.canonical(), wan21_defaults(), "--config"), c);
}

TEST(ConfigSpec, EqualConfigurationsCompareEqualWhateverTheSpelling) {
  const EvalConfig a = parse_config_spec("shift=5.0,steps=20", tiny_defaults(), "--config");
  EXPECT_EQ(a, tiny_defaults());
  EXPECT_FALSE(parse_config_spec("steps=19", tiny_defaults(), "--config") == tiny_defaults());
  // Shortest round-trip numbers: 0.1 stays 0.1.
  EXPECT_NE(parse_config_spec("shift=0.1", tiny_defaults(), "x").canonical().find("shift=0.1,"),
            std::string::npos);
}

TEST(ConfigSpec, BadSpecsNameTheKey) {
  EXPECT_NE(error_of("stepz=3").find("unknown key 'stepz'"), std::string::npos);
  EXPECT_NE(error_of("steps=0").find("--config steps"), std::string::npos);
  EXPECT_NE(error_of("steps=2.5").find("--config steps"), std::string::npos);
  EXPECT_NE(error_of("steps=").find("--config steps"), std::string::npos);
  EXPECT_NE(error_of("shift=0").find("--config shift"), std::string::npos);
  EXPECT_NE(error_of("shift=nan").find("--config shift"), std::string::npos);
  EXPECT_NE(error_of("guide=-1").find("--config guide"), std::string::npos);
  EXPECT_NE(error_of("sampler=ddim").find("--config sampler"), std::string::npos);
  EXPECT_NE(error_of("precision=fp16").find("--config precision"), std::string::npos);
  EXPECT_NE(error_of("size=256").find("--config size"), std::string::npos);
  EXPECT_NE(error_of("size=256x").find("--config size"), std::string::npos);
  EXPECT_NE(error_of("frames=-3").find("--config frames"), std::string::npos);
  EXPECT_NE(error_of("attention=sparse").find("--config attention"), std::string::npos);
  EXPECT_NE(error_of("steps=3,steps=4").find("'steps' given twice"), std::string::npos);
  EXPECT_NE(error_of("steps").find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of("steps=3,").find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of("steps=3,default").find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  for (const std::string& key : config_keys())
    EXPECT_NE(error_of("x=1").find(key), std::string::npos) << key;  // the message lists keys
}

TEST(ConfigSpec, ApplySetsWhatTheConfigurationOwns) {
  GenerateOptions o;
  o.prompt = "kept";
  o.seed = 7;
  const EvalConfig c = parse_config_spec("steps=3,shift=2,guide=1.5,sampler=dpm++,precision=bf16",
                                         tiny_defaults(), "--config");
  apply_config(c, o);
  EXPECT_EQ(o.prompt, "kept");
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(*o.width, 256);
  EXPECT_EQ(*o.height, 256);
  EXPECT_EQ(*o.frames, 17);
  EXPECT_EQ(o.denoise.steps, 3);
  EXPECT_DOUBLE_EQ(o.denoise.shift, 2.0);
  EXPECT_DOUBLE_EQ(o.denoise.guide_scale, 1.5);
  EXPECT_EQ(o.denoise.sampler, "dpm++");
  EXPECT_EQ(o.precision, wan::Precision::kBF16);
  EXPECT_EQ(o.vae_precision, wan::Precision::kBF16);
  EXPECT_EQ(o.attention, "dense");
}

}  // namespace
}  // namespace vidax::eval
