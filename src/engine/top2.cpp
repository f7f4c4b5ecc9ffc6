#include "aoi/engine/top2.h"

#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AOI_TOP2_X86 1
#endif

namespace aoi::engine {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// The reference: two running maxima in one pass. A strict '>' keeps the lower id on ties (as llama.cpp's
// greedy sampler does) and never takes a NaN.
Top2 top2_scalar(const float* logits, int n) {
  float v1 = kMinusInf;
  float v2 = kMinusInf;
  int i1 = kNoToken;
  int i2 = kNoToken;
  for (int i = 0; i < n; ++i) {
    const float v = logits[i];
    if (v > v2) {
      if (v > v1) {
        v2 = v1;
        i2 = i1;
        v1 = v;
        i1 = i;
      } else {
        v2 = v;
        i2 = i;
      }
    }
  }
  return {.token = i1, .logit = v1, .second = i2, .second_logit = v2};
}

// The vector kernels answer in four sweeps, each branch-free over the row: the largest value, the first id
// holding it, the largest of the others (both sides of that id), the first other id holding that. What the
// scalar loop's rules give, by construction: its argmax is the first id of the maximum, and its runner-up the
// first id, other than the argmax, of the maximum of the rest.
template <class Kernel>
Top2 top2_by_sweeps(const float* p, int n) {
  Top2 out{.token = kNoToken, .logit = kMinusInf, .second = kNoToken, .second_logit = kMinusInf};
  const float m1 = Kernel::max(p, 0, n);
  if (!(m1 > kMinusInf)) return out;
  const int i1 = Kernel::find(p, 0, n, m1, kNoToken);
  out.token = i1;
  out.logit = p[i1];  // the value itself (+0 and -0 compare equal)
  const float left = Kernel::max(p, 0, i1);
  const float right = Kernel::max(p, i1 + 1, n);
  const float m2 = right > left ? right : left;
  if (!(m2 > kMinusInf)) return out;
  out.second = Kernel::find(p, 0, n, m2, i1);
  out.second_logit = p[out.second];
  return out;
}

#ifdef AOI_TOP2_X86

// MAXPS returns its second operand when either is NaN: with the accumulator second, a NaN in the row is passed
// over, as the scalar '>' passes it over.
struct Avx2 {
  __attribute__((target("avx2"))) static float max(const float* p, int begin, int end) {
    __m256 acc = _mm256_set1_ps(kMinusInf);
    int i = begin;
    for (; i + 8 <= end; i += 8) acc = _mm256_max_ps(_mm256_loadu_ps(p + i), acc);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    float m = kMinusInf;
    for (const float v : lanes) m = v > m ? v : m;
    for (; i < end; ++i) m = p[i] > m ? p[i] : m;
    return m;
  }
  __attribute__((target("avx2"))) static int find(const float* p, int begin, int end, float value, int skip) {
    const __m256 target = _mm256_set1_ps(value);
    int i = begin;
    for (; i + 8 <= end; i += 8) {
      unsigned mask =
          static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + i), target, _CMP_EQ_OQ)));
      if (skip >= i && skip < i + 8) mask &= ~(1u << (skip - i));
      if (mask != 0) return i + __builtin_ctz(mask);
    }
    for (; i < end; ++i) {
      if (i != skip && p[i] == value) return i;
    }
    return kNoToken;
  }
};

// GCC 12's AVX-512 headers initialise vectors from themselves (_mm512_undefined_ps), which its own
// -Wuninitialized reports at every use (GCC bug 105593); the values are all written before they are read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
struct Avx512 {
  __attribute__((target("avx512f"))) static float max(const float* p, int begin, int end) {
    __m512 acc = _mm512_set1_ps(kMinusInf);
    int i = begin;
    for (; i + 16 <= end; i += 16) acc = _mm512_max_ps(_mm512_loadu_ps(p + i), acc);
    float m = _mm512_reduce_max_ps(acc);
    for (; i < end; ++i) m = p[i] > m ? p[i] : m;
    return m;
  }
  __attribute__((target("avx512f"))) static int find(const float* p, int begin, int end, float value, int skip) {
    const __m512 target = _mm512_set1_ps(value);
    int i = begin;
    for (; i + 16 <= end; i += 16) {
      unsigned mask = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + i), target, _CMP_EQ_OQ);
      if (skip >= i && skip < i + 16) mask &= ~(1u << (skip - i));
      if (mask != 0) return i + __builtin_ctz(mask);
    }
    for (; i < end; ++i) {
      if (i != skip && p[i] == value) return i;
    }
    return kNoToken;
  }
};
#pragma GCC diagnostic pop

#endif

Top2Kernel widest_available() {
  if (top2_kernel_available(Top2Kernel::kAvx512)) return Top2Kernel::kAvx512;
  if (top2_kernel_available(Top2Kernel::kAvx2)) return Top2Kernel::kAvx2;
  return Top2Kernel::kScalar;
}

}  // namespace

const char* top2_kernel_name(Top2Kernel kernel) {
  switch (kernel) {
    case Top2Kernel::kAvx2: return "avx2";
    case Top2Kernel::kAvx512: return "avx512";
    case Top2Kernel::kScalar: break;
  }
  return "scalar";
}

bool top2_kernel_available(Top2Kernel kernel) {
  switch (kernel) {
    case Top2Kernel::kScalar: return true;
#ifdef AOI_TOP2_X86
    case Top2Kernel::kAvx2: return __builtin_cpu_supports("avx2");
    case Top2Kernel::kAvx512: return __builtin_cpu_supports("avx512f");
#else
    default: return false;
#endif
  }
  return false;
}

Top2Kernel top2_kernel() {
  static const Top2Kernel kernel = widest_available();
  return kernel;
}

Top2 top2_with(Top2Kernel kernel, const float* logits, int n) {
  switch (kernel) {
#ifdef AOI_TOP2_X86
    case Top2Kernel::kAvx2: return top2_by_sweeps<Avx2>(logits, n);
    case Top2Kernel::kAvx512: return top2_by_sweeps<Avx512>(logits, n);
#endif
    default: return top2_scalar(logits, n);
  }
}

Top2 top2(const float* logits, int n) { return top2_with(top2_kernel(), logits, n); }

}  // namespace aoi::engine
