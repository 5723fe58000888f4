#include "tools/synth_fill.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace flotilla::tools {
namespace {

using model::kFillGranule;

struct FillParams {
  SynthInit init;
  model::DType dtype;
  float center;
  float half_width;
  int scale_base;
  int64_t used;
  uint64_t nbytes;
  uint64_t key;  // from (seed, name)
};

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// Writes the low `n` bytes of `word` (little-endian) to dst, which may be
// unaligned: tensors after an odd-sized U8 tensor start at odd offsets.
void Store(uint8_t* dst, uint64_t word, size_t n) {
  std::memcpy(dst, &word, n);
}

void UniformBf16(const FillParams& p, Xoshiro256pp& rng, uint8_t* dst,
                 size_t len) {
  const float scale = p.half_width / 32768.0f;
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t r = rng.Next();
    uint64_t word = 0;
    for (int k = 0; k < 4; ++k) {
      const int16_t v = static_cast<int16_t>(r >> (16 * k));
      const float f = p.center + static_cast<float>(v) * scale;
      word |= static_cast<uint64_t>(FloatBits(f) >> 16) << (16 * k);
    }
    Store(dst + i, word, std::min<size_t>(8, len - i));
  }
}

void UniformF32(const FillParams& p, Xoshiro256pp& rng, uint8_t* dst,
                size_t len) {
  const float scale = p.half_width / 2147483648.0f;
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t r = rng.Next();
    uint64_t word = 0;
    for (int k = 0; k < 2; ++k) {
      const int32_t v = static_cast<int32_t>(r >> (32 * k));
      const float f = p.center + static_cast<float>(v) * scale;
      word |= static_cast<uint64_t>(FloatBits(f)) << (32 * k);
    }
    Store(dst + i, word, std::min<size_t>(8, len - i));
  }
}

// KDA decay rates: exp(A_log) in [1, 16) for the heads in use, zero in the
// padding entries as in the release.
void ALog(const FillParams& p, Xoshiro256pp& rng, uint64_t first_element,
          uint8_t* dst, size_t len) {
  for (size_t i = 0; i < len; i += 4) {
    const uint64_t r = rng.Next();
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
    const bool used = static_cast<int64_t>(first_element + i / 4) < p.used;
    const float f = used ? std::log(1.0f + 15.0f * u) : 0.0f;
    Store(dst + i, FloatBits(f), std::min<size_t>(4, len - i));
  }
}

void RandomBytes(Xoshiro256pp& rng, uint8_t* dst, size_t len) {
  for (size_t i = 0; i < len; i += 8) {
    Store(dst + i, rng.Next(), std::min<size_t>(8, len - i));
  }
}

// E8M0 exponents around scale_base; a little jitter so groups differ in
// magnitude as real quantised weights do.
void Mxfp4Scales(const FillParams& p, Xoshiro256pp& rng, uint8_t* dst,
                 size_t len) {
  static constexpr int kDelta[4] = {-1, 0, 0, 1};
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t r = rng.Next();
    uint64_t word = 0;
    for (int k = 0; k < 8; ++k) {
      const int s = p.scale_base + kDelta[(r >> (8 * k)) & 3];
      word |= static_cast<uint64_t>(s & 0xFF) << (8 * k);
    }
    Store(dst + i, word, std::min<size_t>(8, len - i));
  }
}

// Fills block `block` (kFillGranule bytes, or the tensor's tail) whole.
void GenerateBlock(const FillParams& p, uint64_t block, uint8_t* dst,
                   size_t len) {
  uint64_t st = p.key ^ (block * 0xD1B54A32D192ED03ull);
  Xoshiro256pp rng(SplitMix64(&st));
  const uint64_t first_byte = block * kFillGranule;
  switch (p.init) {
    case SynthInit::kUniform:
      if (p.dtype == model::DType::kBF16) {
        UniformBf16(p, rng, dst, len);
      } else {
        UniformF32(p, rng, dst, len);
      }
      return;
    case SynthInit::kALog:
      ALog(p, rng, first_byte / 4, dst, len);
      return;
    case SynthInit::kMxfp4Packed:
      RandomBytes(rng, dst, len);
      return;
    case SynthInit::kMxfp4Scale:
      Mxfp4Scales(p, rng, dst, len);
      return;
  }
}

void Fill(const FillParams& p, uint64_t offset, uint64_t size, uint8_t* dst) {
  // The writer never crosses a block edge; a range that covers its block
  // whole (the common case) is generated in place, a part (at a buffer edge)
  // through scratch so it gets the same bytes.
  const uint64_t block = offset / kFillGranule;
  const uint64_t start = block * kFillGranule;
  const size_t len =
      static_cast<size_t>(std::min<uint64_t>(kFillGranule, p.nbytes - start));
  if (offset == start && size == len) {
    GenerateBlock(p, block, dst, len);
    return;
  }
  thread_local std::vector<uint8_t> scratch;
  scratch.resize(kFillGranule);
  GenerateBlock(p, block, scratch.data(), len);
  std::memcpy(dst, scratch.data() + (offset - start), size);
}

}  // namespace

Xoshiro256pp::Xoshiro256pp(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix64(&seed);
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

model::TensorFill MakeSynthFill(const SynthTensor& t, uint64_t seed) {
  uint64_t st = seed;
  const uint64_t seed_mix = SplitMix64(&st);
  st = seed_mix ^ Fnv1a64(t.name);
  FillParams p{t.init,       t.dtype, t.center,   t.half_width,
               t.scale_base, t.used,  t.nbytes(), SplitMix64(&st)};
  return [p](uint64_t offset, uint64_t size, uint8_t* dst) {
    Fill(p, offset, size, dst);
  };
}

}  // namespace flotilla::tools
