// A model family that exists only in this test ("toy_moe": per layer a
// residual matvec, a softmax top-2 router and SwiGLU experts; no attention)
// is registered from here (family::RegisterFamily, RegisterEngineOpener)
// and runs through what every family shares, without any shared file
// naming it: generate, `--plan`'s memory plan, the packer, the streamed
// trunk (RegionRing, read through the reader factory) and an expert
// worker's shard plan and compute.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/model/language_model.h"
#include "coordinator/model/local_experts.h"
#include "coordinator/stream/region_ring.h"
#include "expert-worker/expert_compute.h"
#include "expert-worker/shard_plan.h"
#include "gtest/gtest.h"
#include "shared/base/status_macros.h"
#include "shared/family/family.h"
#include "shared/kernels/kernels.h"
#include "shared/model/safetensors.h"
#include "shared/model/safetensors_writer.h"
#include "shared/model/tensor_names.h"
#include "shared/pack/region_builder.h"
#include "shared/testing/faulty_reader.h"
#include "tests/distributed_test_util.h"
#include "tools/pack.h"

namespace flotilla {
namespace {

constexpr int kLayers = 3, kHidden = 32, kExperts = 4, kTopK = 2;
constexpr int kInter = 48, kVocab = 40;

std::string LayerName(int layer, const char* what) {
  return "toy.layers." + std::to_string(layer) + "." + what + ".weight";
}

pack::FieldSpec Matrix(const char* field, std::string src, size_t rows,
                       size_t cols) {
  return pack::FieldSpec{
      field, pack::FieldKind::kMatrix, std::move(src), "", rows, cols};
}

const family::Family& ToyFamily();

class ToyConfig : public family::FamilyConfig {
 public:
  const family::Family& family() const override { return ToyFamily(); }
  model::MoeSpec Moe() const override {
    model::MoeSpec m;
    m.num_layers = kLayers;
    m.num_experts = kExperts;
    m.num_experts_per_token = kTopK;
    m.hidden_size = kHidden;
    m.intermediate_size = kInter;
    m.expert_names.prefix = "toy.";
    return m;
  }
  model::ModelShape Shape() const override {
    model::ModelShape s;
    s.num_layers = kLayers;
    s.moe_layers = kLayers;
    s.num_experts = kExperts;
    s.experts_per_token = kTopK;
    s.vocab_size = kVocab;
    s.hidden_size = kHidden;
    s.workspace_bytes_per_token = 4 * (4 * kHidden + kExperts + kVocab);
    s.expert_format = "f32";
    s.expert_hidden = kHidden;
    s.expert_intermediate = kInter;
    return s;
  }
  std::vector<pack::FieldSpec> LayerSchema(int layer) const override {
    return {Matrix("mix", LayerName(layer, "mix"), kHidden, kHidden),
            Matrix("router", LayerName(layer, "router"), kExperts, kHidden)};
  }
  std::vector<pack::FieldSpec> GlobalsSchema() const override {
    return {pack::FieldSpec{"norm", pack::FieldKind::kVector, "toy.norm.weight",
                            "", kHidden, 0}};
  }
  std::vector<pack::FieldSpec> VocabSchema(bool lm_head) const override {
    return {Matrix("matrix",
                   lm_head ? "toy.lm_head.weight" : "toy.embed.weight", kVocab,
                   kHidden)};
  }
  uint64_t ReleasedExpertRunBytes() const override {
    return 3ull * kInter * kHidden * 4;
  }
  std::string ReleasedFormats() const override { return "F32 everything"; }
};

absl::StatusOr<std::unique_ptr<family::FamilyConfig>> ParseToy(
    const nlohmann::json& root, const std::string&, const std::string& source) {
  if (root.value("num_hidden_layers", 0) != kLayers) {
    return absl::InvalidArgumentError(
        source + ": num_hidden_layers: the toy family has 3");
  }
  return std::unique_ptr<family::FamilyConfig>(new ToyConfig);
}

const family::Family& ToyFamily() {
  static const family::Family* f = new family::Family{
      .name = "toy_moe",
      .model_types = {"toy_moe"},
      .model_type_prefixes = {},
      .architectures = {},
      .default_without_model_type = false,
      .parse = &ParseToy,
  };
  return *f;
}

// --- The forward pass -----------------------------------------------------

struct ToyLayer : coordinator::BoundRegion {
  kernels::DenseMatrix mix, router;
};

absl::StatusOr<kernels::DenseMatrix> View(const pack::RegionLayout& l,
                                          const uint8_t* base,
                                          const char* name) {
  const pack::RegionField* f = l.Find(name);
  if (f == nullptr || f->shape.size() != 2) {
    return absl::DataLossError(std::string("no matrix ") + name);
  }
  return kernels::DenseMatrix{
      f->dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                      : kernels::DenseType::kF32,
      base + f->offset, static_cast<size_t>(f->shape[0]),
      static_cast<size_t>(f->shape[1])};
}

absl::StatusOr<std::unique_ptr<coordinator::BoundRegion>> BindToyLayer(
    int, const pack::RegionLayout& layout, const uint8_t* data) {
  auto b = std::make_unique<ToyLayer>();
  FLOTILLA_ASSIGN_OR_RETURN(b->mix, View(layout, data, "mix"));
  FLOTILLA_ASSIGN_OR_RETURN(b->router, View(layout, data, "router"));
  return std::unique_ptr<coordinator::BoundRegion>(std::move(b));
}

class ToySequence : public coordinator::ModelSequence {
 public:
  size_t bytes() const override { return sizeof(*this); }
  std::unique_ptr<ModelSequence> Clone() const override {
    return std::make_unique<ToySequence>(*this);
  }
};

class ToyModel : public coordinator::LanguageModel {
 public:
  // Layers from `layers` (a ring) when given, else from `in_memory`.
  ToyModel(std::unique_ptr<coordinator::LayerSource> layers,
           std::vector<std::unique_ptr<coordinator::BoundRegion>> in_memory,
           std::vector<io::AlignedBuffer> buffers,
           std::vector<pack::Region> regions, kernels::DenseMatrix embed,
           kernels::DenseMatrix lm_head,
           std::unique_ptr<coordinator::ExpertBackend> experts,
           std::shared_ptr<model::TensorSource> source,
           std::unique_ptr<kernels::ThreadPool> pool)
      : source_(std::move(source)),
        pool_(std::move(pool)),
        layers_(std::move(layers)),
        in_memory_(std::move(in_memory)),
        buffers_(std::move(buffers)),
        regions_(std::move(regions)),
        embed_(embed),
        lm_head_(lm_head),
        experts_(std::move(experts)) {}

  int vocab_size() const override { return kVocab; }
  std::unique_ptr<coordinator::ModelSequence> StartSequence() const override {
    return std::make_unique<ToySequence>();
  }
  coordinator::ExpertBackend* experts() override { return experts_.get(); }
  uint64_t resident_trunk_bytes() const override { return 0; }

  absl::Status Forward(coordinator::ModelSequence*,
                       const std::vector<int32_t>& ids, bool all_positions,
                       std::vector<float>* logits) override {
    FLOTILLA_RETURN_IF_ERROR(coordinator::CheckTokenIds(ids, kVocab));
    const size_t n = ids.size(), e = kHidden;
    std::vector<float> h(n * e), tmp(n * e), r(n * kExperts), out(n * e);
    for (size_t t = 0; t < n; ++t) {
      const float* row = static_cast<const float*>(embed_.data) + ids[t] * e;
      std::copy(row, row + e, h.begin() + t * e);
    }
    if (layers_ != nullptr) FLOTILLA_RETURN_IF_ERROR(layers_->BeginStep());
    for (int layer = 0; layer < kLayers; ++layer) {
      const coordinator::BoundRegion* b =
          in_memory_.empty() ? nullptr : in_memory_[layer].get();
      if (layers_ != nullptr) {
        FLOTILLA_ASSIGN_OR_RETURN(b, layers_->Acquire(layer));
      }
      const ToyLayer& w = *static_cast<const ToyLayer*>(b);
      kernels::MatMul(w.mix, h.data(), n, tmp.data(), pool_.get());
      for (size_t k = 0; k < n * e; ++k) h[k] += std::tanh(tmp[k]);
      kernels::MatMul(w.router, h.data(), n, r.data(), pool_.get());
      if (layers_ != nullptr) layers_->Release(layer);
      // Top-2 of a softmax, renormalised; ties go to the lower index.
      std::vector<coordinator::ExpertTask> tasks;
      for (size_t t = 0; t < n; ++t) {
        const float* s = r.data() + t * kExperts;
        int a = 0;
        for (int x = 1; x < kExperts; ++x) a = s[x] > s[a] ? x : a;
        int c = a == 0 ? 1 : 0;
        for (int x = 0; x < kExperts; ++x) c = x != a && s[x] > s[c] ? x : c;
        const float wa = 1.0f / (1.0f + std::exp(s[c] - s[a]));
        tasks.push_back({static_cast<int32_t>(t), a, wa});
        tasks.push_back({static_cast<int32_t>(t), c, 1.0f - wa});
      }
      FLOTILLA_RETURN_IF_ERROR(experts_->ComputeLayer(
          layer, h.data(), static_cast<int>(n), tasks, out.data()));
      for (size_t k = 0; k < n * e; ++k) h[k] += out[k];
    }
    const size_t first = all_positions ? 0 : n - 1;
    logits->resize((n - first) * kVocab);
    kernels::MatMul(lm_head_, h.data() + first * e, n - first, logits->data(),
                    pool_.get());
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<model::TensorSource> source_;  // destroyed last
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<coordinator::LayerSource> layers_;
  std::vector<std::unique_ptr<coordinator::BoundRegion>> in_memory_;
  std::vector<io::AlignedBuffer> buffers_;  // the ring's vocab regions
  std::vector<pack::Region> regions_;       // in memory: every region
  kernels::DenseMatrix embed_, lm_head_;
  std::unique_ptr<coordinator::ExpertBackend> experts_;
};

// The toy family's EngineOpener: the trunk in memory, or streamed from a
// pack through the ring every family shares; the experts in memory.
absl::StatusOr<std::unique_ptr<coordinator::Engine>> OpenToy(
    const coordinator::EngineOptions& o,
    std::unique_ptr<coordinator::Engine> engine) {
  // The config OpenEngine parsed (and found this family by).
  const family::FamilyConfig* c = engine->config.get();
  FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<model::SafetensorsCheckpoint> ckpt,
                            model::SafetensorsCheckpoint::OpenDir(o.model_dir));
  std::shared_ptr<model::TensorSource> source(std::move(ckpt));
  auto pool = std::make_unique<kernels::ThreadPool>(1);
  FLOTILLA_ASSIGN_OR_RETURN(
      std::unique_ptr<coordinator::LocalExperts> experts,
      coordinator::LocalExperts::Create(source.get(), c->Moe(), pool.get()));
  std::unique_ptr<coordinator::LayerSource> layers;
  std::vector<std::unique_ptr<coordinator::BoundRegion>> in_memory;
  std::vector<io::AlignedBuffer> buffers;
  std::vector<pack::Region> regions;
  kernels::DenseMatrix embed, lm_head;
  if (o.pack_dir.empty()) {
    for (int layer = 0; layer < kLayers; ++layer) {
      FLOTILLA_ASSIGN_OR_RETURN(
          pack::Region r, pack::BuildRegion(*source, c->LayerSchema(layer)));
      regions.push_back(std::move(r));
      FLOTILLA_ASSIGN_OR_RETURN(auto b,
                                BindToyLayer(layer, regions.back().layout,
                                             regions.back().bytes.data()));
      in_memory.push_back(std::move(b));
    }
    for (bool head : {false, true}) {
      FLOTILLA_ASSIGN_OR_RETURN(
          pack::Region r, pack::BuildRegion(*source, c->VocabSchema(head)));
      regions.push_back(std::move(r));
      FLOTILLA_ASSIGN_OR_RETURN(
          (head ? lm_head : embed),
          View(regions.back().layout, regions.back().bytes.data(), "matrix"));
    }
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(pack::PackManifest m,
                              pack::LoadPackManifest(o.pack_dir));
    coordinator::RegionRingOptions ro;
    ro.pack_dir = o.pack_dir;
    ro.pinned_layers = std::max(0, o.max_pinned_layers);
    ro.reader = io::ReaderKind::kPread;
    ro.reader_factory = o.reader_factory;
    FLOTILLA_ASSIGN_OR_RETURN(auto ring, coordinator::RegionRing::Open(
                                             m, kLayers, &BindToyLayer, ro));
    for (const char* kind : {"embed", "lm_head"}) {
      const pack::PackRegion* r = ring->manifest().FindRegion(kind);
      if (r == nullptr) return absl::DataLossError("no vocab region");
      FLOTILLA_ASSIGN_OR_RETURN(io::AlignedBuffer b,
                                io::AlignedBuffer::Allocate(r->size, true));
      FLOTILLA_RETURN_IF_ERROR(ring->ReadRegion(*r, b.data()));
      FLOTILLA_ASSIGN_OR_RETURN(
          (std::string(kind) == "embed" ? embed : lm_head),
          View(r->layout, b.data(), "matrix"));
      buffers.push_back(std::move(b));
    }
    FLOTILLA_RETURN_IF_ERROR(ring->Start());
    engine->trunk_layers = ring.get();
    engine->streaming = true;
    engine->pack_dir = o.pack_dir;
    layers = std::move(ring);
  }
  engine->model = std::make_unique<ToyModel>(
      std::move(layers), std::move(in_memory), std::move(buffers),
      std::move(regions), embed, lm_head, std::move(experts), source,
      std::move(pool));
  return engine;
}

// --- A checkpoint of the family ------------------------------------------

// Small deterministic values in [-0.5, 0.5) per (tensor, element).
model::TensorToWrite F32(const std::string& name, std::vector<int64_t> shape,
                         uint32_t seed) {
  return model::TensorToWrite{
      name, model::DType::kF32, std::move(shape),
      [seed](uint64_t offset, uint64_t size, uint8_t* dst) {
        for (uint64_t k = 0; k < size; ++k) {
          const uint64_t i = (offset + k) / 4;
          uint32_t x = static_cast<uint32_t>(i) * 2654435761u + seed * 40503u;
          x ^= x >> 13;
          x *= 0x5bd1e995u;
          x ^= x >> 15;
          const float v = static_cast<float>(x % 1000) / 1000.0f - 0.5f;
          uint8_t bytes[4];
          std::memcpy(bytes, &v, 4);
          dst[k] = bytes[(offset + k) % 4];
        }
      }};
}

void WriteToyCheckpoint(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << R"({"model_type": "toy_moe", "num_hidden_layers": 3})";
  std::vector<model::TensorToWrite> t;
  uint32_t seed = 1;
  t.push_back(F32("toy.embed.weight", {kVocab, kHidden}, seed++));
  t.push_back(F32("toy.lm_head.weight", {kVocab, kHidden}, seed++));
  t.push_back(F32("toy.norm.weight", {kHidden}, seed++));
  for (int l = 0; l < kLayers; ++l) {
    t.push_back(F32(LayerName(l, "mix"), {kHidden, kHidden}, seed++));
    t.push_back(F32(LayerName(l, "router"), {kExperts, kHidden}, seed++));
    for (int x = 0; x < kExperts; ++x) {
      for (int which = 0; which < 3; ++which) {
        const std::vector<int64_t> shape =
            which == 1 ? std::vector<int64_t>{kHidden, kInter}
                       : std::vector<int64_t>{kInter, kHidden};
        t.push_back(
            F32(model::ExpertMatrixPrefix({"toy."}, l, x, which) + "weight",
                shape, seed++));
      }
    }
  }
  auto w = model::SafetensorsWriter::Create({});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->WriteShard(dir + "/model.safetensors", t).ok());
}

class FamilyPluginTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    family::RegisterFamily(&ToyFamily());
    coordinator::RegisterEngineOpener("toy_moe", &OpenToy);
  }
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(WriteToyCheckpoint(model_dir()));
  }
  std::string model_dir() const { return tmp_.path() + "/toy"; }

  absl::StatusOr<coordinator::GenerateResult> Run(
      const coordinator::EngineOptions& o, std::string* family = nullptr) {
    FLOTILLA_ASSIGN_OR_RETURN(auto engine, coordinator::OpenEngine(o));
    if (family != nullptr) *family = engine->family;
    coordinator::GenerateOptions g;
    g.max_tokens = 6;
    g.keep_logits = true;
    return coordinator::Generate(*engine->model, {3, 7, 11}, g, nullptr);
  }

  dtest::TempDir tmp_;
};

TEST_F(FamilyPluginTest, GeneratesInMemoryAndStreamedBitForBit) {
  coordinator::EngineOptions o;
  o.model_dir = model_dir();
  std::string name;
  auto in_memory = Run(o, &name);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  EXPECT_EQ(name, "toy_moe");
  ASSERT_EQ(in_memory->generated_ids.size(), 6u);
  ASSERT_EQ(in_memory->logits.size(), 6u * kVocab);
  float spread = 0;
  for (float v : in_memory->logits) {
    ASSERT_TRUE(std::isfinite(v));
    spread = std::max(spread, std::fabs(v - in_memory->logits[0]));
  }
  EXPECT_GT(spread, 0.01f) << "the toy forward pass computes nothing";

  // The packer every family shares.
  tools::PackOptions p;
  p.model_dir = model_dir();
  p.out_dir = tmp_.path() + "/pack";
  p.progress = nullptr;
  p.verify = true;
  auto packed = tools::PackCheckpoint(p);
  ASSERT_TRUE(packed.ok()) << packed.status();

  // Every layer through the ring, every read through the reader factory.
  auto plan = std::make_shared<testutil::FaultPlan>();
  o.pack_dir = p.out_dir;
  o.max_pinned_layers = 0;
  o.reader_factory = testutil::FaultyReaderFactory(plan);
  testutil::Fault count;
  count.kind = testutil::FaultKind::kEio;
  count.path_contains = "trunk.bin";
  count.count = 0;  // counts the reads, hits none
  plan->Set(count);
  auto streamed = Run(o);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(streamed->generated_ids, in_memory->generated_ids);
  EXPECT_TRUE(streamed->logits == in_memory->logits);
  // 6 steps x 3 layers, the vocab regions, and at most the ring's 2 slots
  // read ahead.
  EXPECT_GE(plan->seen(), 6 * 3 + 2);
  EXPECT_LE(plan->seen(), 6 * 3 + 2 + 2);

  // A read that fails mid-generation names the file and offset.
  testutil::Fault eio;
  eio.kind = testutil::FaultKind::kEio;
  eio.path_contains = "trunk.bin";
  eio.skip = 10;
  plan->Set(eio);
  auto broken = Run(o);
  EXPECT_EQ(plan->hits(), 1);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("trunk.bin"), std::string::npos)
      << broken.status();
  EXPECT_NE(broken.status().message().find("offset"), std::string::npos)
      << broken.status();

  // --plan sizes it from the pack.
  plan->Clear();
  auto memory_plan = coordinator::PlanEngine(o);
  ASSERT_TRUE(memory_plan.ok()) << memory_plan.status();
  EXPECT_EQ(memory_plan->num_layers, kLayers);
  EXPECT_EQ(memory_plan->pinned_layers, 0);
}

TEST_F(FamilyPluginTest, AnExpertWorkerServesItsExperts) {
  expert_worker::PlanOptions po;
  po.model_dir = model_dir();
  po.shard = {0, 1};
  po.shard_given = true;
  po.memory_budget_bytes = 64ull << 20;
  auto shard = expert_worker::BuildShardPlan(po);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->config.num_experts, kExperts);
  EXPECT_EQ(shard->row_width, kHidden);
  expert_worker::ComputeOptions co;
  co.direct_io = false;
  auto compute = expert_worker::ExpertCompute::Create(*shard, co);
  ASSERT_TRUE(compute.ok()) << compute.status();

  auto ckpt = model::SafetensorsCheckpoint::OpenDir(model_dir());
  ASSERT_TRUE(ckpt.ok());
  kernels::ThreadPool pool(1);
  auto local =
      coordinator::LocalExperts::Create(ckpt->get(), ToyConfig().Moe(), &pool);
  ASSERT_TRUE(local.ok()) << local.status();

  std::vector<float> z(2 * kHidden);
  for (size_t i = 0; i < z.size(); ++i)
    z[i] = 0.01f * static_cast<float>(i) - 0.3f;
  expert_worker::ComputeCall call;
  call.layer = 1;
  call.row_width = kHidden;
  call.num_rows = 2;
  call.activations = z.data();
  call.activations_size = z.size();
  call.assignments = {{0, 1, 1.0f}, {1, 3, 1.0f}};
  call.kind = expert_worker::CallKind::kExpertOutputs;
  auto shape = (*compute)->Validate(call);
  ASSERT_TRUE(shape.ok()) << shape.status();
  std::vector<float> outputs(shape->output_floats);
  expert_worker::ComputeCallStats stats;
  ASSERT_TRUE(
      (*compute)->Run(call, *shape, outputs.data(), nullptr, &stats).ok());
  double norm = 0;
  for (float v : outputs) norm += static_cast<double>(v) * v;
  EXPECT_GT(norm, 0.0);
  EXPECT_EQ(stats.experts_computed, 2u);
  for (int a = 0; a < 2; ++a) {
    std::vector<float> want(2 * kHidden);
    ASSERT_TRUE(
        (*local)
            ->ComputeLayer(1, z.data(), 2, {call.assignments[a]}, want.data())
            .ok());
    for (int j = 0; j < kHidden; ++j) {
      EXPECT_EQ(outputs[a * kHidden + j],
                want[call.assignments[a].row * kHidden + j])
          << "assignment " << a << " element " << j;
    }
  }
}

}  // namespace
}  // namespace flotilla
