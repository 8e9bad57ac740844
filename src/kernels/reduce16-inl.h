// Internal to the float kernels (matmul.cc, matmul_rows.cc): the fixed tree
// sum that ends every output's 16 semantic lanes — the one place it is
// written, so the packed and the in-place products share its bits. Included
// inside each file's per-target namespace, once per Highway target
// (foreach_target re-includes the .cc), after `hn`, DF (16 float lanes,
// capped), kN (lanes per vector) and kV (vectors per 16 lanes) — so it has no
// include guard, by design, and is not a header for anyone else.
// NOLINT(build/header_guard)

// The 16-lane tree sum of one accumulator held as kV vectors of kN lanes:
// t[l] += t[l + h] for h = 8, 4, 2, 1 (the same bits for every vector width;
// tests compare AVX2 with AVX3).
template <class D>
HWY_INLINE float reduce_vec(D d, hn::Vec<D> v) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return hn::GetLane(v);  // one lane: all halving steps were across vectors
#else
  constexpr size_t n = hn::MaxLanes(D());
  static_assert(n >= 4, "unsupported vector width");
  if constexpr (n > 4) {
    const hn::Half<D> dh;
    return reduce_vec(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    v = hn::Add(v, hn::Shuffle1032(v));                  // lanes 0,1: t0+t2, t1+t3
    return hn::GetLane(hn::Add(v, hn::Shuffle2301(v)));  // lane 0: (t0+t2)+(t1+t3)
  }
#endif
}

HWY_INLINE float reduce16(const hn::Vec<DF>* acc) {
  hn::Vec<DF> a[kV];
  for (size_t v = 0; v < kV; ++v) a[v] = acc[v];
  // Halves that span vectors first (h >= kN), then within one vector.
  for (size_t w = kV / 2; w >= 1; w /= 2)
    for (size_t v = 0; v < w; ++v) a[v] = hn::Add(a[v], a[v + w]);
  return reduce_vec(DF(), a[0]);
}
