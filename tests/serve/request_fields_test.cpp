// POST /v1/videos bodies (serve/request_fields.h) and plan errors named by field
// (serve/video_request.h).
#include <gtest/gtest.h>

#include "serve/request_fields.h"
#include "serve/video_request.h"

namespace vidax::serve {
namespace {

using nlohmann::json;

std::string field_of(const json& body) {
  try {
    parse_video_request(body);
  } catch (const RequestError& e) {
    return e.field() + " | " + e.what();
  }
  return "accepted";
}

TEST(DecodeBase64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {
      {"", ""},
      {"Zg==", "f"},
      {"Zm8=", "fo"},
      {"Zm9v", "foo"},
      {"Zm9vYg==", "foob"},
      {"Zm9vYmE=", "fooba"},
      {"Zm9vYmFy", "foobar"},
      {"Zm8", "fo"},
      {"Zg", "f"},  // unpadded
  };
  for (const auto& [in, out] : vectors) {
    const auto got = decode_base64(in);
    ASSERT_TRUE(got.has_value()) << in;
    EXPECT_EQ(*got, out) << in;
  }
  EXPECT_EQ(*decode_base64("/+8="), std::string("\xff\xef"));
}

TEST(DecodeBase64, RefusesMalformedText) {
  for (const char* bad :
       {"Z", "Zm9vY", "Zm 9v", "Zm9v\n", "Zh==", "Zm9=", "Zg===", "=Zg=", "Zm-v", "Zm_v", "Zg=a"})
    EXPECT_FALSE(decode_base64(bad).has_value()) << bad;
}

TEST(ImageExtension, SniffsTheMagic) {
  EXPECT_EQ(image_extension(std::string("\x89PNG\r\n\x1a\n....", 12)), "png");
  EXPECT_EQ(image_extension("\xff\xd8\xff\xe0"), "jpg");
  EXPECT_EQ(image_extension(std::string("RIFF\x10\x00\x00\x00WEBPVP8 ", 16)), "webp");
  EXPECT_EQ(image_extension(std::string("RIFF\x10\x00\x00\x00WAVEfmt ", 16)), "");
  EXPECT_EQ(image_extension("GIF89a"), "");
  EXPECT_EQ(image_extension(""), "");
}

TEST(ParseVideoRequest, ReadsEveryField) {
  const json body = {{"prompt", "a cat"},    {"negative_prompt", "blur"},
                     {"size", "832x480"},    {"num_frames", 33},
                     {"steps", 20},          {"seed", 123},
                     {"sampler", "euler"},   {"guide_scale", 4.5},
                     {"shift", 3},           {"attention", "window:3,3,3"},
                     {"accel", "teacache"},  {"image", "iVBORw0KGgo="},
                     {"last_image", nullptr}};
  const VideoRequestFields f = parse_video_request(body);
  EXPECT_EQ(f.prompt, "a cat");
  EXPECT_EQ(f.negative_prompt, "blur");
  EXPECT_EQ(f.width, 832);
  EXPECT_EQ(f.height, 480);
  EXPECT_EQ(f.num_frames, 33);
  EXPECT_EQ(f.steps, 20);
  EXPECT_EQ(f.seed, 123u);
  EXPECT_EQ(f.sampler, "euler");
  EXPECT_EQ(f.guide_scale, 4.5);
  EXPECT_EQ(f.shift, 3.0);
  EXPECT_EQ(f.attention, "window:3,3,3");
  EXPECT_EQ(f.accel, "teacache");
  EXPECT_EQ(image_extension(f.image), "png");
  EXPECT_TRUE(f.last_image.empty());  // null: not given
}

TEST(ParseVideoRequest, NullAndMissingFieldsKeepTheDefaults) {
  const VideoRequestFields f =
      parse_video_request({{"prompt", "x"}, {"steps", nullptr}, {"seed", nullptr}});
  EXPECT_FALSE(f.steps.has_value());
  EXPECT_FALSE(f.seed.has_value());
  EXPECT_FALSE(f.width.has_value());
  EXPECT_FALSE(f.sampler.has_value());
  EXPECT_EQ(parse_video_request({{"prompt", "x"}, {"steps", 5.0}}).steps, 5);  // 5.0 is 5
}

TEST(ParseVideoRequest, NamesTheBadField) {
  EXPECT_EQ(field_of(json::array()), " | the body must be a JSON object");
  EXPECT_EQ(field_of({{"steps", 3}}), "prompt | prompt: required");
  EXPECT_EQ(field_of({{"prompt", " \n"}}), "prompt | prompt: the prompt is empty");
  EXPECT_EQ(field_of({{"prompt", 5}}), "prompt | prompt: expected a string, got 5");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"fps", 8}}).substr(0, 23), "fps | unknown field 'fp");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"steps", 2.5}}),
            "steps | steps: expected an integer, got 2.5");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"steps", 1001}}),
            "steps | steps: expected 1..1000, got 1001");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"steps", true}}),
            "steps | steps: expected an integer, got true");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"seed", -1}}).substr(0, 7), "seed | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"seed", 18446744073709551615ull}}).substr(0, 7), "seed | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"num_frames", 1e300}}).substr(0, 13), "num_frames | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"size", "832x"}}).substr(0, 7), "size | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"size", "0x480"}}).substr(0, 7), "size | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"size", "9999999x480"}}).substr(0, 7), "size | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"size", "-832x480"}}).substr(0, 7), "size | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"sampler", "ddim"}}).substr(0, 10), "sampler | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"guide_scale", -1}}).substr(0, 14), "guide_scale | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"shift", 0}}).substr(0, 8), "shift | ");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"image", "aGVsbG8="}}),
            "image | image: not a PNG, JPEG or WebP image");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"image", "data:image/png,AAAA"}}),
            "image | image: a data URL must be base64 (data:image/png;base64,...)");
  EXPECT_EQ(field_of({{"prompt", "x"}, {"last_image", "iVBORw0KGgo="}}),
            "last_image | last_image: give the first frame as image too");
}

TEST(RequestErrorFromPlan, RenamesFlagsToFields) {
  auto named = [](const std::string& message) {
    const RequestError e = request_error_from_plan(InputError(message));
    return e.field() + " | " + e.what();
  };
  EXPECT_EQ(named("--frames 10: the frame count must be 4k+1"),
            "num_frames | num_frames 10: the frame count must be 4k+1");
  EXPECT_EQ(named("--size 65x64: multiples of 16"), "size | size 65x64: multiples of 16");
  // The field is the flag the message starts from; every flag in it is renamed.
  EXPECT_EQ(named("--accel hsa: runs with --sampler euler only"),
            "accel | accel hsa: runs with sampler euler only");
  EXPECT_EQ(named("--last-image: give --image too").substr(0, 13), "last_image | ");
  EXPECT_EQ(named("--image-size is not a flag"), " | --image-size is not a flag");
  EXPECT_EQ(named("the model needs 40 GB"), " | the model needs 40 GB");
}

}  // namespace
}  // namespace vidax::serve
