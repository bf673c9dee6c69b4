// The planner's search: the meshes it proposes are exactly those the runtime executes (the
// runtime's own checks accept every proposal and refuse every mesh it rejects for a constraint),
// memory rejections, a placement-aware choice that beats rank order where the topology makes it
// matter, plan files that round-trip, and the errors of impossible requests.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "dist/mesh.h"
#include "models/wan/dit_config.h"
#include "models/wan/dit_schedule.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/vae_schedule.h"
#include "plan/placement.h"
#include "plan/plan_file.h"
#include "plan/planner.h"

namespace vidax::plan {
namespace {

PlanRequest request(const std::string& preset, int64_t w, int64_t h, int64_t frames) {
  PlanRequest r;
  r.model = preset;
  r.config = *wan::dit_preset(preset);
  r.width = w;
  r.height = h;
  r.frames = frames;
  return r;
}

// Whether the runtime would build this mesh for the model (dist/mesh.h and the tp splits of
// nn/linear.h over the tensor declaration).
bool runtime_accepts(const wan::DitConfig& c, const dist::MeshSpec& m) {
  try {
    dist::validate_mesh(m, m.size());
    dist::validate_mesh_for_model(m, c.num_heads, true);
    for (const auto& d : wan::dit_tensor_decls(c))
      for (int r = 0; r < m.tp; ++r) shard_slice(d, r, m.tp);
  } catch (const InputError&) {
    return false;
  }
  return true;
}

TEST(Planner, ProposesExactlyTheMeshesTheRuntimeRuns) {
  for (const char* preset : {"wan2.1-t2v-1.3b", "wan2.1-t2v-14b", "wan2.2-ti2v-5b"}) {
    for (const char* topo : {"h100-nvswitch-x8", "tpu-v5e-2x4", "tpu-v4-2x2x1"}) {
      PlanRequest r = request(preset, 832, 480, 81);
      if (std::string(preset) == "wan2.2-ti2v-5b") {
        r.vae_stride_hw = 16;
        r.z_dim = 48;
      }
      const Plan p = make_plan(r, *topology_preset(topo));
      std::set<std::string> seen;
      int runnable = 0;
      for (const Candidate& c : p.candidates) {
        SCOPED_TRACE(std::string(preset) + " " + topo + " " + c.mesh.str() + " " + c.weights);
        seen.insert(c.mesh.str() + c.weights);
        const bool accepted = runtime_accepts(r.config, c.mesh);
        const bool constraint = c.status == "rejected" &&
                                c.reason.find("per device") == std::string::npos &&
                                c.reason.find("sharded") == std::string::npos;
        EXPECT_EQ(accepted, !constraint) << c.reason;
        if (c.status != "rejected") {
          EXPECT_TRUE(accepted);
        }
        if (c.status == "ranked") {
          ++runnable;
          EXPECT_GT(c.best()->cost.compute, 0);
        }
        if (c.weights == "sharded" && c.mesh.sp() < 2) {
          EXPECT_EQ(c.status, "rejected");
        }
      }
      // Every factorisation of N into cfg x ring x ulysses x tp, twice (resident, sharded).
      int n = p.topology.devices(), count = 0;
      for (int c = 1; c <= 2; ++c)
        for (int t = 1; t <= n; ++t)
          for (int u = 1; u <= n; ++u)
            if (n % (c * t * u) == 0) ++count;
      EXPECT_EQ(static_cast<int>(seen.size()), 2 * count);
      EXPECT_EQ(p.enumerated, 2 * count);
      EXPECT_GT(runnable, 0);
      EXPECT_EQ(p.winner().status, "ranked");
    }
  }
}

TEST(Planner, PlacementAwareChoiceBeatsRankOrderOnALine) {
  // A 4 x 2 slice numbered along the 4-long side first: rank order puts Ulysses-4 on a line
  // without wrap-around; the planner finds the 2 x 2 square (half the busiest link's bytes).
  const Topology t = parse_topology(
      R"({"name":"line","device":{"kind":"x","bf16_tflops":200,"memory_gib":64,)"
      R"("memory_GBps":800},"fabric":{"kind":"torus","dims":[4,2],"wrap":[false,false],)"
      R"("link_GBps":5}})",
      "test");
  PlanRequest r = request("wan2.1-t2v-1.3b", 832, 480, 81);
  r.weight_modes = {"resident"};
  const Plan p = make_plan(r, t);
  const Candidate* cu4 = nullptr;
  for (const Candidate& c : p.candidates)
    if (c.mesh == dist::MeshSpec{2, 1, 4, 1}) cu4 = &c;
  ASSERT_NE(cu4, nullptr);
  ASSERT_EQ(cu4->status, "ranked");
  EXPECT_NE(cu4->best()->placement.description.find("ulysses=4 2x2"), std::string::npos)
      << cu4->best()->placement.description;
  EXPECT_LT(cu4->best()->cost.collectives.at("all_to_all@ulysses"),
            0.6 * cu4->placements.back().cost.collectives.at("all_to_all@ulysses"));
  EXPECT_GT(cu4->rank_order_step, cu4->best()->cost.step);
}

// A measured topology whose shares grow with a rank's rows: the planner prices each mesh at the
// rows it gives a rank (cfg=2 runs every row on each rank, ulysses=2 half of them).
TEST(Planner, PricesEachMeshAtItsRanksRows) {
  PlanRequest r = request("wan2.1-t2v-1.3b", 416, 240, 17);
  r.weight_modes = {"resident"};
  const std::string base =
      R"({"name":"cpu-2","device":{"kind":"cpu","bf16_tflops":1,"memory_gib":64,)"
      R"("memory_GBps":20,"efficiency":{"gemm":0.5,"attention":0.5,"memory":0.5})";
  const std::string fabric = R"(},"fabric":{"kind":"switch","nodes":1,"devices_per_node":2,)"
                             R"("intra":{"kind":"shm","GBps":5}}})";
  const Topology flat = parse_topology(base + fabric, "flat");
  // The same shares at half the rows, double them at all the rows.
  const Topology by_rows = parse_topology(
      base +
          R"(,"efficiency_by_rows":[{"rows":975,"gemm":0.5,"attention":0.5,"memory":0.5},)"
          R"({"rows":1950,"gemm":1.0,"attention":1.0,"memory":1.0}])" +
          fabric,
      "by-rows");
  const Placement order = rank_order_placement(flat, dist::MeshSpec{2, 1, 1, 1});
  const StepCost cfg_flat = predict_step(r, flat, dist::MeshSpec{2, 1, 1, 1}, false, order);
  const StepCost cfg_rows = predict_step(r, by_rows, dist::MeshSpec{2, 1, 1, 1}, false, order);
  EXPECT_NEAR(cfg_rows.compute, cfg_flat.compute / 2, 1e-9 * cfg_flat.compute);
  const Placement u_order = rank_order_placement(flat, dist::MeshSpec{1, 1, 2, 1});
  const StepCost u_flat = predict_step(r, flat, dist::MeshSpec{1, 1, 2, 1}, false, u_order);
  const StepCost u_rows = predict_step(r, by_rows, dist::MeshSpec{1, 1, 2, 1}, false, u_order);
  EXPECT_NEAR(u_rows.compute, u_flat.compute, 1e-9 * u_flat.compute);
  // The plan file reports the shares used for the chosen mesh and its rows.
  const nlohmann::json j = make_plan(r, by_rows).to_json(false);
  const int64_t rows = j["topology"]["device"]["efficiency_rows"].get<int64_t>();
  EXPECT_TRUE(rows == 975 || rows == 1950) << rows;
  EXPECT_DOUBLE_EQ(j["topology"]["device"]["gemm_efficiency"].get<double>(),
                   rows == 1950 ? 1.0 : 0.5);
}

// The measured waits at collectives: each collective between ops (on a group larger than one
// rank) that follows some compute adds the table's wait for that compute; with a table that
// gives W after any compute the step grows by W per such collective, counted here on the
// schedule with every segment's repeats written out.
TEST(Planner, AddsTheMeasuredWaitAtEachCollectiveAfterCompute) {
  PlanRequest r = request("wan2.1-t2v-1.3b", 416, 240, 17);
  r.config.num_layers = 3;
  r.weight_modes = {"resident"};
  const std::string base =
      R"({"name":"cpu-2","device":{"kind":"cpu","bf16_tflops":1,"memory_gib":64,)"
      R"("memory_GBps":20},"fabric":{"kind":"switch","nodes":1,"devices_per_node":2,)"
      R"("intra":{"kind":"shm","GBps":5}})";
  const double wait = 0.01;
  const Topology plain = parse_topology(base + "}", "plain");
  const Topology waits = parse_topology(
      base + R"(,"collective_waits":[{"group":2,"compute_us":0.001,"wait_us":10000}]})", "waits");
  for (const dist::MeshSpec& mesh :
       {dist::MeshSpec{2, 1, 1, 1}, dist::MeshSpec{1, 1, 2, 1}, dist::MeshSpec{1, 1, 1, 2}}) {
    wan::DitScheduleRequest sr;
    sr.tokens = plan_geometry(r).tokens;
    const LatentGeometry g = plan_geometry(r);
    sr.latent_numel = g.channels * g.frames * g.height * g.width;
    const dist::Schedule schedule = wan::dit_step_schedule(r.config, sr, mesh);
    int collectives_after_compute = 0;
    bool computed = false;
    for (const auto& seg : schedule.segments)
      for (int64_t rep = 0; rep < seg.repeat; ++rep)
        for (const auto& op : seg.ops) {
          if (!op.collective()) {
            computed = computed || op.flops > 0 || op.bytes > 0;
          } else if (!op.overlapped && dist::axis_size(mesh, op.axis) > 1) {
            collectives_after_compute += computed ? 1 : 0;
            computed = false;
          }
        }
    ASSERT_GT(collectives_after_compute, 0) << mesh.str();
    const Placement order = rank_order_placement(plain, mesh);
    const StepCost without = predict_step(r, plain, mesh, false, order);
    const StepCost with = predict_step(r, waits, mesh, false, order);
    EXPECT_DOUBLE_EQ(without.waits, 0);
    EXPECT_NEAR(with.waits, wait * collectives_after_compute, 1e-9) << mesh.str();
    EXPECT_NEAR(with.step - without.step, with.waits, 1e-9) << mesh.str();
    EXPECT_NEAR(with.compute, without.compute, 1e-12) << mesh.str();
  }
}

TEST(Planner, RejectsWhatDoesNotFitAndSaysWhy) {
  // 14B on one TPU v5e (16 GB): nothing fits.
  PlanRequest r = request("wan2.1-t2v-14b", 1280, 720, 81);
  try {
    make_plan(r, *topology_preset("tpu-v5e-2x2"));
    ADD_FAILURE() << "expected no fit";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no mesh of 4 devices fits"), std::string::npos)
        << e.what();
  }
  // Resident 14B does not fit a v5e even split 8 ways by sequence; sharded weights do.
  r.devices = 0;
  const Plan p = make_plan(r, *topology_preset("tpu-v5e-2x4"));
  EXPECT_EQ(p.winner().weights, "sharded");
  EXPECT_LE(p.winner().memory_per_device, p.topology.device.memory_bytes);
  // Bad requests name the flag.
  r.frames = 80;
  EXPECT_THROW(make_plan(r, *topology_preset("tpu-v5e-2x4")), InputError);
  r.frames = 81;
  r.width = 1281;
  EXPECT_THROW(make_plan(r, *topology_preset("tpu-v5e-2x4")), InputError);
  // --devices cuts a GPU node, not a torus.
  PlanRequest small = request("wan2.1-t2v-1.3b", 832, 480, 81);
  small.devices = 4;
  EXPECT_EQ(make_plan(small, *topology_preset("h100-nvswitch-x8")).topology.devices(), 4);
  EXPECT_THROW(make_plan(small, *topology_preset("tpu-v5e-2x4")), InputError);
  small.devices = 12;
  EXPECT_THROW(make_plan(small, *topology_preset("h100-nvswitch-x8-ib-x2")), InputError);
}

TEST(Planner, StepMethodsRefuseMeshesAndScaleFixedSchedules) {
  PlanRequest r = request("wan2.1-t2v-1.3b", 832, 480, 81);
  const Plan dense = make_plan(r, *topology_preset("h100-nvswitch-x8"));
  EXPECT_DOUBLE_EQ(dense.work_fraction, 1.0);
  // MagCache's published 1.3B table: a fixed schedule, planned before running.
  r.accel = "magcache";
  const Plan magcache = make_plan(r, *topology_preset("h100-nvswitch-x8"));
  EXPECT_GT(magcache.work_fraction, 0.3);
  EXPECT_LT(magcache.work_fraction, 0.9);
  EXPECT_FALSE(magcache.accel_planned.is_null());
  EXPECT_NEAR(magcache.to_json(false)["predicted"]["denoise_s"].get<double>(),
              magcache.winner().best()->cost.step * 50 * magcache.work_fraction, 1e-9);
  // HSA runs in one process or under cfg=2 only: every other mesh is rejected with its reason.
  r.accel = "hsa";
  r.sampler = "euler";
  r.devices = 2;
  const Plan hsa = make_plan(r, *topology_preset("h100-nvswitch-x8"));
  EXPECT_EQ(hsa.winner().mesh, (dist::MeshSpec{2, 1, 1, 1}));
  for (const Candidate& c : hsa.candidates)
    if ((c.mesh.sp() > 1 || c.mesh.tp > 1) && c.weights == "resident") {
      EXPECT_EQ(c.status, "rejected") << c.mesh.str();
      EXPECT_NE(c.reason.find("--accel hsa"), std::string::npos) << c.reason;
    }
  // An adaptive method is priced dense; a bad spec is the method's own error.
  r.accel = "teacache";
  r.sampler = "unipc";
  r.devices = 0;
  EXPECT_DOUBLE_EQ(make_plan(r, *topology_preset("h100-nvswitch-x8")).work_fraction, 1.0);
  r.accel = "magcache:thresh=-1";
  EXPECT_THROW(make_plan(r, *topology_preset("h100-nvswitch-x8")), InputError);
}

TEST(PlanFile, RoundTripsAndChecksItsFields) {
  const Plan p =
      make_plan(request("wan2.1-t2v-1.3b", 832, 480, 81), *topology_preset("tpu-v5e-2x4"));
  const std::string text = p.to_json(true).dump();
  const PlanFile f = parse_plan_file(text, "plan.json");
  EXPECT_EQ(f.mesh, p.winner().mesh);
  EXPECT_EQ(f.weights, p.winner().weights);
  EXPECT_EQ(f.devices, 8);
  ASSERT_EQ(f.device_of_rank.size(), 8u);
  for (size_t r = 0; r < 8; ++r)
    EXPECT_EQ(f.device_of_rank[r],
              p.topology.device_name(p.winner().best()->placement.device_of_rank[r]));
  EXPECT_EQ(f.width, 832);
  EXPECT_EQ(f.frames, 81);
  EXPECT_EQ(f.dim, 1536);
  EXPECT_DOUBLE_EQ(f.predicted_step_seconds, p.winner().best()->cost.step);
  EXPECT_EQ(parse_plan_file(f.json.dump(), "again").mesh, f.mesh);
  auto error_of = [&](const nlohmann::json& j) {
    try {
      parse_plan_file(j.dump(), "plan.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json j = f.json;
  j["mesh"]["ulysses"] = 0;
  EXPECT_NE(error_of(j).find("plan.json: mesh.ulysses: expected a positive integer"),
            std::string::npos);
  j = f.json;
  j["topology"]["devices"] = 4;
  EXPECT_NE(error_of(j).find("topology.devices"), std::string::npos);
  j = f.json;
  j["weights"] = "streamed";
  EXPECT_NE(error_of(j).find("weights: expected"), std::string::npos);
  j = f.json;
  j["placement"]["ranks"].erase(3);
  EXPECT_NE(error_of(j).find("placement.ranks"), std::string::npos);
  j = f.json;
  j["mesh"]["ring"] = 65537;
  EXPECT_NE(error_of(j).find("mesh.ring: expected at most 65536"), std::string::npos);
  j = f.json;
  j["topology"]["name"] = 5;
  EXPECT_NE(error_of(j).find("topology.name: expected a string"), std::string::npos);
  j = f.json;
  j.erase("vidax_plan");
  EXPECT_NE(error_of(j).find("vidax_plan"), std::string::npos);
  EXPECT_NE(error_of(nlohmann::json::array()).find("vidax_plan"), std::string::npos);
}

}  // namespace
}  // namespace vidax::plan

namespace vidax::plan {
namespace {

// The phases around the loop on a device with round figures: umT5 at the GEMM share (twice on a
// guided cfg=1 mesh, once per CFG rank, split over tp), the VAE convolutions at their own share of
// the bf16 or f32 peak, tiles dealt to every rank, I2V's CLIP and encode, and the sum.
TEST(Planner, PricesThePhasesAroundTheLoop) {
  const Topology t = parse_topology(
      R"({"name":"gpu-4","device":{"kind":"gpu","bf16_tflops":100,"fp32_tflops":40,)"
      R"("memory_gib":1000,"memory_GBps":1000,"efficiency":{"gemm":0.5,"attention":0.5,)"
      R"("memory":0.5,"conv":0.25,"conv_fp32":0.5}},"fabric":{"kind":"switch","nodes":1,)"
      R"("devices_per_node":4,"intra":{"kind":"nvswitch","GBps":100}}})",
      "gpu-4");
  PlanRequest r = request("wan2.1-t2v-14b", 1280, 720, 81);
  r.t5 = wan::t5_preset("umt5-xxl");
  r.vae = wan::vae_preset("wan2.1-vae");
  r.text_tokens = 100;
  r.steps = 10;
  const dist::MeshSpec one{1, 1, 1, 1}, cfg{2, 1, 1, 1}, tp{1, 1, 1, 2};
  const double t5 = wan::T5Encoder::forward_flops(*r.t5, 100);
  PhaseCost p = predict_phases(r, t, one, 2.0, 0.5);
  EXPECT_NEAR(p.text, 2 * t5 / (100e12 * 0.5), 1e-12);
  EXPECT_DOUBLE_EQ(p.denoise, 10 * 2.0 * 0.5);
  EXPECT_EQ(p.image, 0);
  EXPECT_NEAR(predict_phases(r, t, cfg, 2.0, 1).text, t5 / (100e12 * 0.5), 1e-12);
  EXPECT_NEAR(predict_phases(r, t, tp, 2.0, 1).text, t5 / (100e12 * 0.5), 1e-12);
  // A VAE schedule priced by hand: convolutions at `conv` FLOP/s, 1x1 convs and attention at
  // `other`, the norms and copies at 500 GB/s.
  const auto priced = [](const dist::Schedule& s, double conv, double other) {
    return s.flops(dist::OpClass::kConv) / conv +
           (s.flops(dist::OpClass::kGemm) + s.flops(dist::OpClass::kAttention)) / other +
           s.memory_bytes() / 500e9;
  };
  // bf16: convolutions at 25% of 100 TFLOP/s, the rest at 50%.
  const double bf16_decode =
      priced(wan::vae_decode_schedule(*r.vae, 81, 720, 1280, wan::Precision::kBF16), 25e12, 50e12);
  EXPECT_NEAR(p.decode, bf16_decode, 1e-9 * bf16_decode);
  EXPECT_EQ(p.decode_ranks, 1);
  EXPECT_NEAR(p.total, p.text + p.denoise + p.decode, 1e-9);
  // f32: convolutions at 50% of 40 TFLOP/s, the rest at the GEMM share of it.
  r.vae_precision = wan::Precision::kFP32;
  const double fp32_decode =
      priced(wan::vae_decode_schedule(*r.vae, 81, 720, 1280, wan::Precision::kFP32), 20e12, 20e12);
  EXPECT_NEAR(predict_phases(r, t, one, 2.0, 1).decode, fp32_decode, 1e-9 * fp32_decode);
  r.vae_precision = wan::Precision::kBF16;
  // Tiles of 48 latent pixels (overlap 6): 2 x 4 over 90 x 160; 4 ranks decode 2 each and send
  // their decoded pixels to the 3 others at 100 GB/s.
  r.vae_tile = 48;
  const dist::MeshSpec four{1, 1, 4, 1};
  const PhaseCost dealt = predict_phases(r, t, four, 2.0, 1);
  EXPECT_EQ(dealt.decode_tiles, 8);
  EXPECT_EQ(dealt.decode_ranks, 4);
  const double tile_s =
      priced(wan::vae_decode_schedule(*r.vae, 81, 384, 384, wan::Precision::kBF16), 25e12, 50e12);
  const double sent = 2.0 * 384 * 384 * 81 * 3 * 4 * 3;
  EXPECT_NEAR(dealt.decode, 2 * tile_s + sent / 100e9 + 21 * t.collective_latency,
              1e-9 * dealt.decode);
  // One rank decodes all 8 tiles itself.
  EXPECT_NEAR(predict_phases(r, t, one, 2.0, 1).decode, 8 * tile_s, 1e-9 * tile_s);
  r.vae_tile = 0;
  // I2V: CLIP on the image plus the VAE encode of the 81-frame conditioning video.
  PlanRequest i2v = request("wan2.1-i2v-14b", 1280, 720, 81);
  i2v.vae = r.vae;
  i2v.image = true;
  const double encode = predict_phases(i2v, t, one, 2.0, 1).image;
  i2v.clip = clip::clip_vision_preset("vit-h-14");
  const double with_clip = predict_phases(i2v, t, one, 2.0, 1).image;
  const double clip_s = with_clip - encode;
  EXPECT_GT(clip_s, 0.3e12 / 50e12);  // ViT-H/14 at 257 tokens: ~0.3-0.4 TFLOP at 50 TFLOP/s
  EXPECT_LT(clip_s, 0.5e12 / 50e12);
  const double encode_s =
      priced(wan::vae_encode_schedule(*r.vae, 81, 720, 1280, wan::Precision::kBF16), 25e12, 50e12);
  EXPECT_NEAR(encode, encode_s, 1e-9 * encode_s);
  // TI2V encodes its one image frame.
  PlanRequest ti2v = request("wan2.2-ti2v-5b", 1280, 704, 121);
  ti2v.vae = wan::vae_preset("wan2.2-vae");
  ti2v.image = true;
  const double frame_s = priced(
      wan::vae_encode_schedule(*ti2v.vae, 1, 704, 1280, wan::Precision::kBF16), 25e12, 50e12);
  EXPECT_NEAR(predict_phases(ti2v, t, one, 2.0, 1).image, frame_s, 1e-9 * frame_s);
}

}  // namespace
}  // namespace vidax::plan
