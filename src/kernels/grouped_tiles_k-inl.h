// Internal to matmul_grouped.cc: its tiles for the K types (Q4_K, Q5_K, Q6_K) on
// the grouped layout (grouped_blocks.h; the arithmetic is quant_dot.h's).
// Included by matmul_grouped.cc inside its per-target namespace, once per
// Highway target (foreach_target re-includes the .cc), after the helpers it
// uses (GroupedArgs, ld32, dpbusd_y, dpbusd_bcast, prefetch_codes,
// store_tile_y) — so it has no include guard, by design, and is not a header
// for anyone else.
// NOLINT(build/header_guard)

// TileInK's members by name, as references: not a structured binding, which
// clang < 16 cannot capture in a lambda (the fuzz build uses clang 14).
#ifndef MTP_TILE_IN_K_NAMES
#define MTP_TILE_IN_K_NAMES(in)                                                   \
  const auto& cg = (in).cg;                                                       \
  const auto& mg = (in).mg;                                                       \
  const auto& xq = (in).xq;                                                       \
  const auto& xd = (in).xd;                                                       \
  const auto& xs = (in).xs;                                                       \
  const auto& x16 = (in).x16
#endif

// What a K-type tile of kQ activation rows (from j0) reads of group g
// (code and meta bytes per (group, block): grouped_blocks.h).
template <size_t kQ, GgmlType kT>
struct TileInK {
  static constexpr size_t kCode = detail::group_code_bytes(kT), kMeta = detail::group_meta_bytes(kT);
  const uint8_t* cg;
  const uint8_t* mg;
  const int8_t* xq[kQ];
  const float* xd[kQ];
  const int8_t* xs[kQ];  // bsum32 (int16 pairs, read 4 bytes at a time)
  const int16_t* x16[kQ];  // bsum (Q6_K)
  HWY_INLINE TileInK(const GroupedArgs& a, size_t g, size_t j0)
      : cg(a.codes + g * a.nb * kCode), mg(a.meta + g * a.nb * kMeta) {
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j)
      xq[j] = a.a->qrow(j0 + j), xd[j] = a.a->drow(j0 + j),
      xs[j] = reinterpret_cast<const int8_t*>(a.a->b32row(j0 + j)), x16[j] = a.a->brow(j0 + j);
  }
};

// Where Q5_K's qh lines start in a (group, block): after Q4_K's 32 qs lines.
constexpr size_t kQhLines = detail::group_code_bytes(GgmlType::Q4_K);

// Q5_K's fifth bits of sub-block sb: bit sb of each qh byte moved to bit 4
// (16-bit shifts by at most 4: the bits crossing a byte land outside 0x10).
template <class V>
HWY_INLINE V q5_fifth(V qh, size_t sb) {
  const __m128i n = _mm_cvtsi32_si128(static_cast<int>(sb <= 4 ? 4 - sb : sb - 4));
  if constexpr (sizeof(V) == 64) {
    return _mm512_and_si512(sb <= 4 ? _mm512_sll_epi16(qh, n) : _mm512_srl_epi16(qh, n), _mm512_set1_epi8(0x10));
  } else {
    return _mm256_and_si256(sb <= 4 ? _mm256_sll_epi16(qh, n) : _mm256_srl_epi16(qh, n), _mm256_set1_epi8(0x10));
  }
}

// Q4_K (kQ5: Q5_K, the fifth bits from the qh lines after the 32 qs lines),
// kQ activation rows against group g, 256-bit: outputs 8h2..8h2 + 7
// of the group in half h2 of each 64-byte line (and of each meta row).
template <size_t kQ, bool kVnni, bool kQ5 = false>
HWY_INLINE void tile_ky(const GroupedArgs& a, size_t g, size_t j0, bool pf) {
  using In = TileInK<kQ, kQ5 ? GgmlType::Q5_K : GgmlType::Q4_K>;
  const In in(a, g, j0);
  MTP_TILE_IN_K_NAMES(in);
  constexpr size_t kCode = In::kCode;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[kQ][2];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* cb = cg + b * kCode;
    const uint8_t* mb = mg + b * In::kMeta;
    if (pf) prefetch_codes<kCode>(a, cb);
    for (size_t h2 = 0; h2 < 2; ++h2) {
      __m256i p[kQ];
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) p[j] = _mm256_setzero_si256();
      for (size_t sb = 0; sb < 8; ++sb) {  // sub-block: nibble sb % 2 of chunk sb / 2
        __m256i s[kQ];
#pragma GCC unroll 8
        for (size_t j = 0; j < kQ; ++j) s[j] = _mm256_setzero_si256();
        const uint8_t* cc = cb + 512 * (sb / 2) + 32 * h2;
        const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mb + 64 + 16 * sb + 8 * h2)));
        // Without VNNI each lane's two int16 sums meet (sc, sc) in one madd.
        const __m256i sc2 = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
#pragma GCC unroll 8
        for (size_t k = 0; k < 8; ++k) {
          const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(cc + 64 * k));
          __m256i w = _mm256_and_si256(sb % 2 ? _mm256_srli_epi16(v, 4) : v, m4);
          if constexpr (kQ5)
            w = _mm256_or_si256(w, q5_fifth(_mm256_load_si256(reinterpret_cast<const __m256i*>(cb + kQhLines + 64 * k + 32 * h2)), sb));
#pragma GCC unroll 8
          for (size_t j = 0; j < kQ; ++j) {
            const __m256i xb = _mm256_set1_epi32(ld32(xq[j] + 256 * b + 32 * sb + 4 * k));
            // Without VNNI: int16 pairs, exact (Q4_K <= 8·2·15·127 = 30480;
            // Q5_K codes < 32 meet sc after every 4 quads, <= 31496).
            s[j] = kVnni ? dpbusd_y(s[j], w, xb) : _mm256_add_epi16(s[j], _mm256_maddubs_epi16(w, xb));
            if (!kVnni && kQ5 && k == 3) {
              p[j] = _mm256_add_epi32(p[j], _mm256_madd_epi16(s[j], sc2));
              s[j] = _mm256_setzero_si256();
            }
          }
        }
#pragma GCC unroll 8
        for (size_t j = 0; j < kQ; ++j)
          p[j] = _mm256_add_epi32(p[j], kVnni ? _mm256_mullo_epi32(s[j], sc) : _mm256_madd_epi16(s[j], sc2));
      }
      __m256i mm[kQ];
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) mm[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (size_t pr = 0; pr < 4; ++pr) {
        const __m256i mp = _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(mb + 192 + 32 * pr + 16 * h2)));
#pragma GCC unroll 8
        for (size_t j = 0; j < kQ; ++j)
          mm[j] = _mm256_add_epi32(mm[j], _mm256_madd_epi16(mp, _mm256_set1_epi32(ld32(xs[j] + 16 * b + 4 * pr))));
      }
      const __m256 dv = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(mb + 16 * h2)));
      const __m256 ndm = _mm256_xor_ps(_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(mb + 32 + 16 * h2))),
                                       _mm256_set1_ps(-0.f));
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) {
        const __m256 dx = _mm256_broadcast_ss(xd[j] + b);
        acc[j][h2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_mul_ps(dv, dx), acc[j][h2]);
        acc[j][h2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm[j]), _mm256_mul_ps(ndm, dx), acc[j][h2]);
      }
    }
  }
  store_tile_y<kQ>(a, g, j0, acc);
}

// Q6_K codes of 16 rows' (or 8 rows') quad t, element k of half h (k < 4):
// the nibble of ql line k & 1 (low for k < 2) and bits 2k, 2k + 1 of the qh
// line moved to bits 4, 5 (16-bit shifts: the bits crossing a byte land
// outside 0x30).
template <size_t kK, class V>
HWY_INLINE V q6_code(V ql, V qh) {
  if constexpr (sizeof(V) == 64) {
    const __m512i lo = _mm512_and_si512(kK < 2 ? ql : _mm512_srli_epi16(ql, 4), _mm512_set1_epi8(0x0F));
    const __m512i hb = kK <= 2 ? _mm512_slli_epi16(qh, 4 - 2 * kK) : _mm512_srli_epi16(qh, 2 * kK - 4);
    return _mm512_or_si512(lo, _mm512_and_si512(hb, _mm512_set1_epi8(0x30)));
  } else {
    const __m256i lo = _mm256_and_si256(kK < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    const __m256i hb = kK <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * kK) : _mm256_srli_epi16(qh, 2 * kK - 4);
    return _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
  }
}

// Q6_K, kQ activation rows against group g, 256-bit: outputs 8h2..8h2 + 7 in
// half h2 of each line. Sub-block j = 8h + 2k + u of 16 elements (quads t =
// 4u..4u + 3): lanes start at −32·bsum16_j, gather Σ q·xq, then meet sc_j.
template <size_t kQ, bool kVnni>
HWY_INLINE void tile_6y(const GroupedArgs& a, size_t g, size_t j0, bool pf) {
  using In = TileInK<kQ, GgmlType::Q6_K>;
  const In in(a, g, j0);
  MTP_TILE_IN_K_NAMES(in);
  constexpr size_t kCode = In::kCode;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kQ][2];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* cb = cg + b * kCode;
    const uint8_t* mb = mg + b * In::kMeta;
    if (pf) prefetch_codes<kCode>(a, cb);
    for (size_t h2 = 0; h2 < 2; ++h2) {
      __m256i p[kQ];
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) p[j] = _mm256_setzero_si256();
      for (size_t hu = 0; hu < 4; ++hu) {  // half h = hu / 2, quads 4u.. (u = hu % 2)
        const size_t h = hu / 2, u = hu % 2;
        auto one_k = [&](auto kc) __attribute__((always_inline)) {
          constexpr size_t k = decltype(kc)::value;
          const size_t sbj = 8 * h + 2 * k + u;
          __m256i sacc[kQ];
#pragma GCC unroll 8
          for (size_t j = 0; j < kQ; ++j) sacc[j] = _mm256_set1_epi32(-32 * x16[j][16 * b + sbj]);
#pragma GCC unroll 4
          for (size_t t = 4 * u; t < 4 * u + 4; ++t) {
            const uint8_t* line = cb + (8 * h + t) * 3 * 64 + 32 * h2;
            const __m256i w = q6_code<k>(_mm256_load_si256(reinterpret_cast<const __m256i*>(line + 64 * (k & 1))),
                                         _mm256_load_si256(reinterpret_cast<const __m256i*>(line + 128)));
#pragma GCC unroll 8
            for (size_t j = 0; j < kQ; ++j) {
              const __m256i xb = _mm256_set1_epi32(ld32(xq[j] + 256 * b + 128 * h + 32 * k + 4 * t));
              sacc[j] = kVnni ? dpbusd_y(sacc[j], w, xb)
                              : _mm256_add_epi32(sacc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(w, xb), ones));
            }
          }
          const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mb + 32 + 16 * sbj + 8 * h2)));
#pragma GCC unroll 8
          for (size_t j = 0; j < kQ; ++j) p[j] = _mm256_add_epi32(p[j], _mm256_mullo_epi32(sacc[j], sc));
        };
        one_k(std::integral_constant<size_t, 0>{});
        one_k(std::integral_constant<size_t, 1>{});
        one_k(std::integral_constant<size_t, 2>{});
        one_k(std::integral_constant<size_t, 3>{});
      }
      const __m256 dv = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(mb + 16 * h2)));
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j)
        acc[j][h2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_mul_ps(dv, _mm256_broadcast_ss(xd[j] + b)), acc[j][h2]);
    }
  }
  store_tile_y<kQ>(a, g, j0, acc);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// acc[i] += Σ_{h<2} s16(u[2i+h])·s16(x[h]): vpdpwssd with the 2 int16 at x
// broadcast (AVX512_VNNI, inline assembly as dpbusd_bcast).
HWY_INLINE __m512i dpwssd_bcast(__m512i acc, __m512i u, const int8_t* x) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const i32u*>(x)));
  return acc;
}

// Q4_K (kQ5: Q5_K), kQ activation rows against group g, 512-bit (VNNI). Up
// to 4 rows take both sub-blocks of a chunk per pass over its lines (2
// integer chains per row), more rows one (registers: 3 per row).
template <size_t kQ, bool kQ5 = false>
HWY_INLINE void tile_kz(const GroupedArgs& a, size_t g, size_t j0, bool pf) {
  using In = TileInK<kQ, kQ5 ? GgmlType::Q5_K : GgmlType::Q4_K>;
  const In in(a, g, j0);
  MTP_TILE_IN_K_NAMES(in);
  constexpr size_t kCode = In::kCode, kH = kQ <= 4 ? 2 : 1;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[kQ];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j] = _mm512_setzero_ps();
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* cb = cg + b * kCode;
    const uint8_t* mb = mg + b * In::kMeta;
    if (pf) prefetch_codes<kCode>(a, cb);
    __m512i p[kQ];
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) p[j] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (size_t s0 = 0; s0 < 8; s0 += kH) {  // sub-blocks s0 .. s0 + kH − 1
      __m512i s[kQ][kH];
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j)
#pragma GCC unroll 2
        for (size_t hh = 0; hh < kH; ++hh) s[j][hh] = _mm512_setzero_si512();
      const uint8_t* cc = cb + 512 * (s0 / 2);
#pragma GCC unroll 8
      for (size_t k = 0; k < 8; ++k) {
        const __m512i v = _mm512_load_si512(cc + 64 * k);
#pragma GCC unroll 2
        for (size_t hh = 0; hh < kH; ++hh) {
          const size_t sb = s0 + hh;
          __m512i w = _mm512_and_si512(sb % 2 ? _mm512_srli_epi16(v, 4) : v, m4);
          if constexpr (kQ5) w = _mm512_or_si512(w, q5_fifth(_mm512_load_si512(cb + kQhLines + 64 * k), sb));
#pragma GCC unroll 8
          for (size_t j = 0; j < kQ; ++j) s[j][hh] = dpbusd_bcast(s[j][hh], w, xq[j] + 256 * b + 32 * sb + 4 * k);
        }
      }
#pragma GCC unroll 2
      for (size_t hh = 0; hh < kH; ++hh) {
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(mb + 64 + 16 * (s0 + hh))));
#pragma GCC unroll 8
        for (size_t j = 0; j < kQ; ++j) p[j] = _mm512_add_epi32(p[j], _mm512_mullo_epi32(s[j][hh], sc));
      }
    }
    __m512i mm[kQ];
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) mm[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (size_t pr = 0; pr < 4; ++pr) {
      const __m512i mp = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(mb + 192 + 32 * pr)));
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) mm[j] = dpwssd_bcast(mm[j], mp, xs[j] + 16 * b + 4 * pr);
    }
    const __m512 dv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(mb)));
    const __m512 ndm = _mm512_castsi512_ps(_mm512_xor_si512(
        _mm512_castps_si512(_mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(mb + 32)))),
        _mm512_set1_epi32(static_cast<int>(0x80000000u))));
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      const __m512 dx = _mm512_set1_ps(xd[j][b]);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[j]), _mm512_mul_ps(dv, dx), acc[j]);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mm[j]), _mm512_mul_ps(ndm, dx), acc[j]);
    }
  }
  const size_t o = g * kGroupRows, n = std::min(kGroupRows, a.rows - o);
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) _mm512_mask_storeu_ps(a.y + (j0 + j) * a.y_stride + o, m, acc[j]);
}
// Q6_K, kQ activation rows against group g, 512-bit (VNNI): as tile_6y with
// a group in one vector; up to 2 rows take the 4 sub-blocks k of a quad run
// at once, up to 4 rows two (chains per row against vpdpbusd's latency).
template <size_t kQ>
HWY_INLINE void tile_6z(const GroupedArgs& a, size_t g, size_t j0, bool pf) {
  using In = TileInK<kQ, GgmlType::Q6_K>;
  const In in(a, g, j0);
  MTP_TILE_IN_K_NAMES(in);
  constexpr size_t kCode = In::kCode, kKs = kQ <= 2 ? 4 : kQ <= 4 ? 2 : 1;
  __m512 acc[kQ];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j] = _mm512_setzero_ps();
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* cb = cg + b * kCode;
    const uint8_t* mb = mg + b * In::kMeta;
    if (pf) prefetch_codes<kCode>(a, cb);
    __m512i p[kQ];
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) p[j] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (size_t hu = 0; hu < 4; ++hu) {
      const size_t h = hu / 2, u = hu % 2;
      auto ks = [&](auto k0c) __attribute__((always_inline)) {
        constexpr size_t k0 = decltype(k0c)::value;
        __m512i sacc[kQ][kKs];
#pragma GCC unroll 8
        for (size_t j = 0; j < kQ; ++j)
#pragma GCC unroll 4
          for (size_t kk = 0; kk < kKs; ++kk)
            sacc[j][kk] = _mm512_set1_epi32(-32 * x16[j][16 * b + 8 * h + 2 * (k0 + kk) + u]);
#pragma GCC unroll 4
        for (size_t t = 4 * u; t < 4 * u + 4; ++t) {
          const uint8_t* line = cb + (8 * h + t) * 3 * 64;
          const __m512i qh = _mm512_load_si512(line + 128);
          auto one = [&](auto kkc) __attribute__((always_inline)) {
            constexpr size_t kk = decltype(kkc)::value, k = k0 + kk;
            const __m512i w = q6_code<k>(_mm512_load_si512(line + 64 * (k & 1)), qh);
#pragma GCC unroll 8
            for (size_t j = 0; j < kQ; ++j)
              sacc[j][kk] = dpbusd_bcast(sacc[j][kk], w, xq[j] + 256 * b + 128 * h + 32 * k + 4 * t);
          };
          one(std::integral_constant<size_t, 0>{});
          if constexpr (kKs >= 2) one(std::integral_constant<size_t, 1>{});
          if constexpr (kKs >= 4) one(std::integral_constant<size_t, 2>{}), one(std::integral_constant<size_t, 3>{});
        }
#pragma GCC unroll 4
        for (size_t kk = 0; kk < kKs; ++kk) {
          const size_t sbj = 8 * h + 2 * (k0 + kk) + u;
          const __m512i sc = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(mb + 32 + 16 * sbj)));
#pragma GCC unroll 8
          for (size_t j = 0; j < kQ; ++j) p[j] = _mm512_add_epi32(p[j], _mm512_mullo_epi32(sacc[j][kk], sc));
        }
      };
      ks(std::integral_constant<size_t, 0>{});
      if constexpr (kKs <= 2) ks(std::integral_constant<size_t, kKs>{});
      if constexpr (kKs == 1) ks(std::integral_constant<size_t, 2>{}), ks(std::integral_constant<size_t, 3>{});
    }
    const __m512 dv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(mb)));
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j)
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[j]), _mm512_mul_ps(dv, _mm512_set1_ps(xd[j][b])), acc[j]);
  }
  const size_t o = g * kGroupRows, n = std::min(kGroupRows, a.rows - o);
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) _mm512_mask_storeu_ps(a.y + (j0 + j) * a.y_stride + o, m, acc[j]);
}
#endif
