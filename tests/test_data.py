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


# --- IDX files and the Fashion-MNIST loader, on small generated files ------------------------------------------


def _write_fashion_like(folder, n_train=12, n_test=5, gz=True, seed=0):
    """Write the four Fashion-MNIST IDX files by hand (header bytes spelled out, not via write_idx)."""
    import gzip as _gzip
    import struct

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        img = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        lab = rng.integers(0, 10, size=n).astype(np.uint8)
        raw_img = struct.pack(">BBBB", 0, 0, 0x08, 3) + struct.pack(">III", n, 28, 28) + img.tobytes()
        raw_lab = struct.pack(">BBBB", 0, 0, 0x08, 1) + struct.pack(">I", n) + lab.tobytes()
        for stem, raw in ((f"{split}-images-idx3-ubyte", raw_img), (f"{split}-labels-idx1-ubyte", raw_lab)):
            if gz:
                (folder / (stem + ".gz")).write_bytes(_gzip.compress(raw))
            else:
                (folder / stem).write_bytes(raw)
        out[split] = (img, lab)
    return out


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_loader_gzip_and_plain(tmp_path, gz):
    raw = _write_fashion_like(tmp_path / "fm", gz=gz)
    assert data.fashion_mnist_available(tmp_path / "fm")
    X, y = data.fashion_mnist("train", root=tmp_path / "fm")
    assert X.shape == (12, 28, 28) and X.dtype == np.float32 and y.dtype == np.int64
    assert 0.0 <= X.min() and X.max() <= 1.0
    img, lab = raw["train"]
    assert np.array_equal(np.rint(X * 255).astype(np.uint8), img)  # pixel by pixel, row-major
    assert abs(X[3, 5, 7] - img[3, 5, 7] / 255.0) < 1e-7
    assert y.tolist() == lab.tolist()
    Xt, yt = data.fashion_mnist("test", root=tmp_path / "fm")
    assert Xt.shape == (5, 28, 28) and yt.tolist() == raw["t10k"][1].tolist()


def test_idx_roundtrip_and_errors(tmp_path):
    for dtype in (np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64):
        a = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
        for name in ("a.idx", "a.idx.gz"):
            p = data.write_idx(tmp_path / f"{np.dtype(dtype).name}-{name}", a)
            b = data.read_idx(p)
            assert b.dtype == a.dtype and np.array_equal(a, b)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01\x00\x00\x00\x01\x00")
    with pytest.raises(DPValueError, match="not an IDX file"):
        data.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))  # says 5 bytes, has 2
    with pytest.raises(DPValueError, match="5 bytes"):
        data.read_idx(tmp_path / "short")
    with pytest.raises(DPValueError, match="split"):
        data.fashion_mnist("validation", root=tmp_path)
    with pytest.raises(DPValueError, match="train-images-idx3-ubyte"):
        data.fashion_mnist("train", root=tmp_path / "empty")


def test_fashion_mnist_data_says_which_data(tmp_path):
    _write_fashion_like(tmp_path / "fm", n_train=30, n_test=10, seed=1)
    Xtr, ytr, Xte, yte, source = data.fashion_mnist_data(20, 6, root=tmp_path / "fm", seed=2)
    assert source == f"fashion-mnist:{tmp_path / 'fm'}"
    assert Xtr.shape == (20, 784) and Xte.shape == (6, 784) and Xtr.dtype == np.float32
    full, _ = data.fashion_mnist("train", root=tmp_path / "fm")
    rows = {r.tobytes() for r in full.reshape(30, -1)}
    assert all(r.tobytes() in rows for r in Xtr) and len({r.tobytes() for r in Xtr}) == 20  # no repeats
    again = data.fashion_mnist_data(20, 6, root=tmp_path / "fm", seed=2)
    assert np.array_equal(again[0], Xtr) and np.array_equal(again[3], yte)  # deterministic in seed
    with pytest.raises(DPValueError, match="n_train"):
        data.fashion_mnist_data(31, 6, root=tmp_path / "fm")
    assert not data.fashion_mnist_available(tmp_path / "none")


def test_fashion_mnist_root_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(tmp_path))
    assert data.fashion_mnist_root() == tmp_path
    assert data.fashion_mnist_root(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("DPBOOK_FASHION_MNIST")
    assert str(data.fashion_mnist_root()) == data.FASHION_MNIST_DIR


# --- the fallback chain: Fashion-MNIST -> scikit-learn's digits -> blobs ---------------------------------------


def _digits_csv():
    """The digits as scikit-learn ships them (``sklearn/datasets/data/digits.csv.gz``: 64 grey levels 0..16 and
    the label per row), read here with numpy, not through ``load_digits``."""
    import gzip as _gzip
    from pathlib import Path as _Path

    sklearn = pytest.importorskip("sklearn")
    raw = np.loadtxt(_gzip.open(_Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"), delimiter=",")
    return raw[:, :64], raw[:, 64].astype(np.int64)


def test_sklearn_digits_match_the_shipped_file():
    levels, labels = _digits_csv()
    X, y = data.sklearn_digits()
    assert X.shape == (1797, 64) == levels.shape and X.dtype == np.float32 and y.dtype == np.int64
    assert np.array_equal(X, (levels / 16).astype(np.float32)) and np.array_equal(y, labels)
    assert X.min() == 0.0 and X.max() == 1.0 and np.bincount(y).min() >= 170  # 10 classes of about 180


def test_digits_path_when_fashion_mnist_is_missing(tmp_path, monkeypatch):
    """No Fashion-MNIST files in $DPBOOK_FASHION_MNIST (an empty folder) and scikit-learn importable: the
    digits, split at random into disjoint training and test sets, and the source says so."""
    pytest.importorskip("sklearn")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(empty))
    assert data.classification_kind() == "sklearn-digits"
    Xtr, ytr, Xte, yte, source = data.fashion_mnist_data(1000, 797, seed=3)
    assert source.startswith("sklearn-digits:scikit-learn ")
    assert Xtr.shape == (1000, 64) and Xte.shape == (797, 64) and Xtr.dtype == np.float32
    # together they are the whole set, each image exactly once (compared as (pixels, label) rows)
    levels, labels = _digits_csv()
    ours = np.c_[np.r_[Xtr, Xte] * 16, np.r_[ytr, yte]]
    theirs = np.c_[levels, labels]
    assert np.array_equal(ours[np.lexsort(ours.T[::-1])], theirs[np.lexsort(theirs.T[::-1])])
    again = data.fashion_mnist_data(1000, 797, seed=3)
    other = data.fashion_mnist_data(1000, 797, seed=4)
    assert np.array_equal(again[0], Xtr) and not np.array_equal(other[0], Xtr)  # the seed picks the split
    with pytest.raises(DPValueError, match="n_train"):
        data.fashion_mnist_data(1500, 400)
    plan = data.classification_plan(2500, 1000, multiple=100)
    assert (plan.kind, plan.n_train, plan.n_test, plan.dim, plan.n_classes) == ("sklearn-digits", 1200, 597, 64, 10)
    assert plan.resized and "digits" in plan.label and "1200 training / 597 test" in plan.label


def test_blobs_path_without_fashion_mnist_and_sklearn(tmp_path, monkeypatch, no_sklearn):
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(tmp_path / "none"))
    assert not data.digits_available() and data.sklearn_digits() is None
    assert data.classification_kind() == "synthetic-blobs"
    Xtr, ytr, Xte, yte, source = data.fashion_mnist_data(50, 10, fallback_dim=5)
    assert source == "synthetic-blobs" and Xtr.shape == (50, 5) and Xte.shape == (10, 5)
    Xb, yb = data.gaussian_blobs(60, dim=5, n_classes=2, seed=0)
    a, b, c, d = data.train_test_split(Xb, yb, 50, seed=0)
    assert np.array_equal(Xtr, a) and np.array_equal(yte, d)
    plan = data.classification_plan(2500, 1000, multiple=100, fallback_dim=7, fallback_classes=3)
    assert (plan.kind, plan.n_train, plan.n_test, plan.dim, plan.n_classes) == ("synthetic-blobs", 2500, 1000, 7, 3)
    assert not plan.resized


def test_fashion_mnist_path_wins_over_digits(tmp_path, monkeypatch):
    _write_fashion_like(tmp_path / "fm", n_train=30, n_test=10, seed=1)
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(tmp_path / "fm"))
    assert data.classification_kind() == "fashion-mnist"
    plan = data.classification_plan(25, 8, multiple=5)
    assert (plan.kind, plan.n_train, plan.n_test, plan.dim, plan.n_classes) == ("fashion-mnist", 25, 8, 784, 10)
    assert data.fashion_mnist_data(25, 8)[4] == f"fashion-mnist:{tmp_path / 'fm'}"


def test_fit_split():
    # Fashion-MNIST (separate pools) and blobs (unlimited): as asked
    assert data.fit_split(2500, 1000, "fashion-mnist", 100) == (2500, 1000)
    assert data.fit_split(10**6, 5, "synthetic-blobs") == (10**6, 5)
    # digits: as asked when they fit the 1797 images ...
    assert data.fit_split(1000, 500, "sklearn-digits", 100) == (1000, 500)
    assert data.fit_split(1000, 797, "sklearn-digits") == (1000, 797)
    # ... else scaled by 1797/3500: 2500 -> 1283.6 -> 1200 (multiple of 100), the other 597 for the test
    assert data.fit_split(2500, 1000, "sklearn-digits", 100) == (1200, 597)
    assert data.fit_split(2500, 1000, "sklearn-digits") == (1283, 514)
    assert data.fit_split(100, 5000, "sklearn-digits", 50) == (50, 1747)  # at least one multiple
    with pytest.raises(DPValueError, match="kind"):
        data.fit_split(10, 10, "mnist")
    with pytest.raises(DPValueError, match="multiple"):
        data.fit_split(3000, 10, "sklearn-digits", 1797)
    with pytest.raises(DPValueError, match="kind"):
        data.classification_label("cifar")
