"""Tests of icl_book.features: feature index sets, orthonormal bases, monomial kernels, partitions."""

from __future__ import annotations

from itertools import product
from math import comb, factorial

import numpy as np
import pytest
from numpy.polynomial import hermite_e, legendre

from icl_book import features as F
from icl_book.estimators import glu_kernel


@pytest.mark.parametrize(("d", "p"), [(1, 1), (1, 4), (2, 3), (3, 3), (5, 2), (4, 4)])
def test_counts_and_order(d, p):
    tuples = F.feature_index_tuples(d, p)
    assert len(tuples) == F.n_features(d, p) == comb(d + p, p) - 1
    assert len(set(tuples)) == len(tuples)
    degrees = [len(t) for t in tuples]
    assert degrees == sorted(degrees)
    for k in range(1, p + 1):  # C(d+k-1, k) monomials of degree exactly k
        assert degrees.count(k) == comb(d + k - 1, k)


@pytest.mark.parametrize(("kind", "poly"), [("hermite", hermite_e), ("legendre", legendre)])
def test_univariate_polynomials_match_numpy(kind, poly):
    z = np.linspace(-2.5, 2.5, 41)
    for k in range(7):
        coef = np.zeros(k + 1)
        coef[k] = 1.0
        scale = 1 / np.sqrt(factorial(k)) if kind == "hermite" else np.sqrt(2 * k + 1)
        expected = (
            scale * poly.hermeval(z, coef) if kind == "hermite" else scale * poly.legval(z, coef)
        )
        got = F.FeatureBlock(1, ((0,) * k,), kind)(z[:, None])[:, 0] if k else np.ones_like(z)
        # float64 recurrences for degree <= 6 on |z| <= 2.5: agreement to ~1e-12 relative
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-12)


def _quadrature(kind, n, d):
    if kind == "hermite":
        z, w = hermite_e.hermegauss(n)
        w = w / np.sqrt(2 * np.pi)
    else:
        z, w = legendre.leggauss(n)
        w = w / 2
    pts = np.array(list(product(z, repeat=d)))
    wts = np.prod(np.array(list(product(w, repeat=d))), axis=1)
    return pts, wts


@pytest.mark.parametrize("kind", ["hermite", "legendre"])
@pytest.mark.parametrize(("d", "p"), [(1, 5), (2, 3), (3, 2)])
def test_orthonormal_under_their_measure(kind, d, p):
    # Gauss quadrature with n nodes is exact for degree <= 2n - 1, so the Gram matrix is exact up to rounding.
    pts, wts = _quadrature(kind, p + 1, d)
    phi = F.feature_map(pts, p, kind=kind)
    gram = phi.T @ (wts[:, None] * phi)
    np.testing.assert_allclose(gram, np.eye(phi.shape[1]), atol=1e-12)
    np.testing.assert_allclose(wts @ phi, 0.0, atol=1e-12)  # no constant component: mean zero


@pytest.mark.parametrize(("d", "p"), [(1, 3), (2, 3), (3, 4)])
def test_monomial_kernel_is_sum_of_powers(d, p):
    rng = np.random.default_rng(0)
    x, xp = rng.standard_normal((7, d)), rng.standard_normal((5, d))
    k = F.feature_kernel(F.partition_features(d, p, 3, kind="monomial"))
    np.testing.assert_allclose(k(x, xp), glu_kernel(p)(x, xp), rtol=1e-12, atol=1e-12)


def test_partition_covers_each_feature_once():
    blocks = F.partition_features(3, 3, 4)
    assert [len(b) for b in blocks] == [4, 4, 4, 4, 3]
    flat = [t for b in blocks for t in b.index_tuples]
    assert flat == F.feature_index_tuples(3, 3)
    x = np.random.default_rng(1).standard_normal((2, 6, 3))
    np.testing.assert_array_equal(
        np.concatenate([b(x) for b in blocks], axis=-1), F.feature_map(x, 3)
    )


def test_feature_kernel_equals_gram_of_concatenation():
    rng = np.random.default_rng(2)
    blocks = F.partition_features(2, 3, 2, kind="legendre")
    x = rng.uniform(-1, 1, (3, 8, 2))
    phi = F.feature_map(x, 3, kind="legendre")
    np.testing.assert_allclose(
        F.feature_kernel(blocks)(x, x), phi @ np.swapaxes(phi, 1, 2), rtol=1e-12
    )


def test_bad_input():
    with pytest.raises(ValueError, match="degree"):
        F.feature_index_tuples(2, 0)
    with pytest.raises(ValueError, match="kind"):
        F.feature_map(np.zeros((2, 2)), 2, kind="chebyshev")
    with pytest.raises(ValueError, match="block_size"):
        F.partition_features(2, 2, 0)
    with pytest.raises(ValueError, match="index tuples"):
        F.FeatureBlock(2, ((2,),))
    with pytest.raises(ValueError, match=r"shape \(\.\.\., d\)"):
        F.FeatureBlock(2, ((0,),))(np.zeros((4, 3)))
    with pytest.raises(TypeError, match="feature_blocks"):
        F.feature_kernel([1, 2])


@pytest.mark.parametrize("kind", ["hermite", "legendre"])
def test_a_block_gives_the_bits_of_each_feature_computed_alone(kind):
    """A block evaluates one recurrence table for all its features; each column must carry exactly
    the bits of its feature computed alone, product by product (the prompts a training run draws,
    and so a resumed checkpoint, depend on them)."""
    rng = np.random.default_rng(3)
    d, p = 4, 3
    x = rng.uniform(-1, 1, (5, 9, d)) if kind == "legendre" else rng.standard_normal((5, 9, d))
    block = F.FeatureBlock(d, tuple(F.feature_index_tuples(d, p)), kind)
    for column, t in zip(np.moveaxis(block(x), -1, 0), block.index_tuples, strict=True):
        alone = np.ones(x.shape[:-1])
        for j, c in enumerate(np.bincount(np.asarray(t))):
            if c:
                alone = alone * F._orthonormal_last(kind, int(c), x[..., j])
        assert np.array_equal(column, alone), t
