"""Tests of dputils.data: deterministic synthetic data, and the CIFAR-10 pickle loader on a tiny
generated folder (checked pixel by pixel against the raw bytes written)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from dputils import data
from dputils.errors import DPValueError


def test_blobs_deterministic_and_separated():
    X1, y1 = data.gaussian_blobs(2000, dim=4, n_classes=2, separation=6.0, seed=5)
    X2, y2 = data.gaussian_blobs(2000, dim=4, n_classes=2, separation=6.0, seed=5)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert X1.dtype == np.float32 and y1.dtype == np.int64 and set(np.unique(y1)) == {0, 1}
    gap = np.linalg.norm(X1[y1 == 0].mean(0) - X1[y1 == 1].mean(0))
    assert abs(gap - 6.0) < 0.3  # class means 6 apart, estimated from 1000 points each


def test_split():
    X, y = data.gaussian_blobs(100, seed=0)
    a, b, c, d = data.train_test_split(X, y, 80)
    assert len(a) == 80 and len(c) == 20
    with pytest.raises(DPValueError, match="n_train"):
        data.train_test_split(X, y, 100)


def test_cifar10_loader_roundtrip(tmp_path):
    folder = data.write_cifar10_like(tmp_path / "cifar", n_per_batch=7, seed=3, batches=2)
    with open(folder / "data_batch_2", "rb") as fh:
        raw = pickle.load(fh, encoding="bytes")
    X, y = data.load_cifar10(folder, train=True, normalize=False)
    assert X.shape == (14, 3, 32, 32) and y.shape == (14,)
    # image 0 of batch 2: red channel = first 1024 bytes, row-major 32x32
    assert np.array_equal(X[7, 0].ravel(), raw[b"data"][0, :1024])
    assert np.array_equal(X[7, 2].ravel(), raw[b"data"][0, 2048:])
    assert y[7:].tolist() == raw[b"labels"]
    Xn, yn = data.load_cifar10(folder, train=False)
    assert Xn.shape == (7, 3, 32, 32) and Xn.dtype == np.float32
    # normalisation uses public constants: check one pixel by hand
    with open(folder / "test_batch", "rb") as fh:
        t = pickle.load(fh, encoding="bytes")
    px = t[b"data"][0, 0] / 255.0
    assert abs(Xn[0, 0, 0, 0] - (px - 0.4914) / 0.2470) < 1e-5


def test_cifar10_errors(tmp_path):
    with pytest.raises(DPValueError, match="folder"):
        data.load_cifar10(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DPValueError, match="folder"):
        data.load_cifar10(tmp_path / "empty")
    with open(tmp_path / "empty" / "test_batch", "wb") as fh:
        pickle.dump({b"data": np.zeros((2, 10), np.uint8), b"labels": [0, 1]}, fh)
    with pytest.raises(DPValueError, match="3072"):
        data.load_cifar10(tmp_path / "empty", train=False)


def test_synthetic_images_shape_and_class_separation():
    from dputils.data import synthetic_images

    X, y = synthetic_images(2000, n_classes=4, separation=3.0, seed=1)
    assert X.shape == (2000, 3, 32, 32) and X.dtype == np.float32 and set(np.unique(y)) <= {0, 1, 2, 3}
    flat = X.reshape(len(X), -1).astype(float)
    n0, n1 = (y == 0).sum(), (y == 1).sum()
    diff = flat[y == 0].mean(0) - flat[y == 1].mean(0)
    # E|mean_0 - mean_1|^2 = |p_0 - p_1|^2 + 3072 (1/n0 + 1/n1); patterns of norm 3/sqrt(2) in 3072 dimensions are
    # nearly orthogonal, so |p_0 - p_1|^2 ~ 9 (sampling sd ~0.5)
    est = diff @ diff - 3072 * (1 / n0 + 1 / n1)
    assert 7.0 < est < 11.0
    assert abs(flat.std() - 1.0) < 0.05  # standardised scale, like normalised CIFAR-10


def test_image_data_prefers_cifar_folder_and_says_so(tmp_path):
    from dputils.data import image_data, write_cifar10_like

    X, y, src = image_data(tmp_path / "missing", 20)
    assert src == "synthetic-images" and X.shape == (20, 3, 32, 32)
    folder = write_cifar10_like(tmp_path / "c10", n_per_batch=15, batches=2)
    X, y, src = image_data(folder, 25)
    assert src.startswith("cifar10:") and X.shape == (25, 3, 32, 32) and len(y) == 25
    with pytest.raises(DPValueError, match="n must be"):
        image_data(folder, 31)
