// Exact widening of 16-bit floats to float32. Both conversions are exact
// (every BF16 and F16 value is representable in float32), so they are done
// with integer bit manipulation: no dependence on the host's F16C support,
// rounding mode or flush-to-zero setting.
#ifndef FLOTILLA_SHARED_MODEL_FLOAT16_H_
#define FLOTILLA_SHARED_MODEL_FLOAT16_H_

#include <cstdint>
#include <cstring>

namespace flotilla::model {

inline float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// BF16 is the top half of a float32.
inline float Bf16ToF32(uint16_t h) {
  return FloatFromBits(static_cast<uint32_t>(h) << 16);
}

// IEEE binary16 -> binary32, including subnormals, infinities and NaN
// payloads.
inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {  // inf / NaN: keep the payload, quiet bit included
    return FloatFromBits(sign | 0x7F800000u | (mant << 13));
  }
  if (exp != 0) {  // normal: rebias 15 -> 127
    return FloatFromBits(sign | ((exp + 112u) << 23) | (mant << 13));
  }
  if (mant == 0) return FloatFromBits(sign);  // +-0
  // Subnormal: value = mant * 2^-24. Normalize so the leading 1 reaches
  // bit 10; each shift lowers the exponent by one.
  uint32_t e = 113;  // exponent of 2^-14 in float32 bias, before shifting
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return FloatFromBits(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_FLOAT16_H_
