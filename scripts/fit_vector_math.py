#!/usr/bin/env python3
"""Fits the polynomials of src/kernels/cpu/vector_math.h (needs python3-mpmath).

exp(r) = E(r)                             for |r| <= ln2 / 2, E of degree 6
exp(r) = E5(r)                            the same, degree 5 (exp_normal_range)
erf(x) = x * P(x^2)                       for |x| < 1, P of degree 6 in x^2
erf(x) = 1 - exp(Q(x - 2.5) - x^2)        for 1 <= |x| <= 4, Q of degree 8
(erf rounds to 1 in f32 beyond 4). Chebyshev fits are within a few percent of
minimax; the printed errors are those of the exact-arithmetic polynomials,
before f32 rounding.
"""
import mpmath as mp

mp.mp.dps = 40


def small(t):
    return mp.erf(mp.sqrt(t)) / mp.sqrt(t) if t > 0 else 2 / mp.sqrt(mp.pi)


def large(s):
    x = s + mp.mpf(2.5)
    return mp.log(mp.erfc(x)) + x * x


def show(name, poly, err, what):
    print(f"{name}: max {what} error {mp.nstr(err, 3)}; highest degree first:")
    for c in poly:
        print(f"  {mp.nstr(c, 12, min_fixed=-1, max_fixed=-1)}f,")


half_ln2 = mp.log(2) / 2
poly, err = mp.chebyfit(mp.exp, [-half_ln2, half_ln2], 7, error=True)
show("E (exp(r) on [-ln2/2, ln2/2])", poly, err, "absolute")
poly, err = mp.chebyfit(mp.exp, [-half_ln2, half_ln2], 6, error=True)
show("E5 (exp(r) on [-ln2/2, ln2/2], degree 5)", poly, err, "absolute")
poly, err = mp.chebyfit(small, [0, 1], 7, error=True)
rel = max(abs(mp.polyval(poly, t) - small(t)) / small(t) for t in mp.linspace(0, 1, 2001))
show("P (erf(x)/x in x^2 on [0, 1])", poly, rel, "relative")
poly, err = mp.chebyfit(large, [-1.5, 1.5], 9, error=True)
show("Q (log erfc(x) + x^2 in x - 2.5 on [1, 4])", poly, err, "absolute (= relative error of erfc)")
