"""Small data sets available offline, and a CIFAR-10 loader for a local copy.

* :func:`gaussian_blobs`: a synthetic classification task (class means on a sphere, isotropic noise),
  as numpy arrays, deterministic in ``seed``; :func:`train_test_split` splits it.
* :func:`load_cifar10`: reads the standard "CIFAR-10 python version" folder (``data_batch_1`` ...
  ``data_batch_5``, ``test_batch``; pickled dicts with ``b"data"`` (N x 3072 uint8, channel-major
  32x32) and ``b"labels"``).  Nothing is downloaded.
* :func:`write_cifar10_like`: writes a tiny folder in that format (for tests and offline demos).
* :func:`synthetic_images`: CIFAR-shaped (3x32x32) classification data generated offline, for runs of the image
  models when no CIFAR-10 copy is at hand (same shapes and scale, so speed and memory are representative).
* :func:`image_data`: CIFAR-10 from a folder when it holds one, otherwise :func:`synthetic_images`, saying which.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np

from .errors import DPValueError, check_positive, check_positive_int

__all__ = ["gaussian_blobs", "train_test_split", "load_cifar10", "write_cifar10_like", "synthetic_images", "image_data",
           "CIFAR10_TRAIN_FILES"]

CIFAR10_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))


def gaussian_blobs(
    n: int, dim: int = 20, n_classes: int = 2, separation: float = 2.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in ``R^dim``: label y uniform on ``n_classes``; x = mean_y + N(0, I), where the class means
    are random orthogonal vectors of length ``separation/sqrt(2)``, so every two means are exactly
    ``separation`` apart (requires ``n_classes <= dim``).
    Returns (X float32 of shape (n, dim), y int64)."""
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    k = check_positive_int("n_classes", n_classes)
    if k < 2:
        raise DPValueError(f"n_classes must be >= 2, got {k}")
    sep = check_positive("separation", separation)
    if k > dim:
        raise DPValueError(f"n_classes must be <= dim ({dim}), got {k}")
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((dim, k)))
    means = (sep / math.sqrt(2)) * q.T  # orthonormal directions: every pair of means is `separation` apart
    y = rng.integers(0, k, size=n)
    X = means[y] + rng.standard_normal((n, dim))
    return X.astype(np.float32), y.astype(np.int64)


def train_test_split(X: np.ndarray, y: np.ndarray, n_train: int, seed: int = 0):
    """A random split with ``n_train`` training points; returns (X_train, y_train, X_test, y_test)."""
    n_train = check_positive_int("n_train", n_train)
    if n_train >= len(X):
        raise DPValueError(f"n_train must be < number of points ({len(X)}), got {n_train}")
    perm = np.random.default_rng(seed).permutation(len(X))
    a, b = perm[:n_train], perm[n_train:]
    return X[a], y[a], X[b], y[b]


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as fh:
        d = pickle.load(fh, encoding="bytes")
    data = d.get(b"data", d.get("data"))
    labels = d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise DPValueError(f"{path}: not a CIFAR-10 python batch (needs 'data' and 'labels')")
    data = np.asarray(data, dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DPValueError(f"{path}: data must have shape (n, 3072), got {data.shape}")
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def load_cifar10(folder: str | Path, train: bool = True, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, 3, 32, 32) and labels (n,) from a local CIFAR-10 python folder (no download).

    ``normalize`` scales to [0, 1] and standardises each channel with the *public* CIFAR-10 statistics
    (so no private statistic of the training data is computed)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DPValueError(f"folder must be an existing directory with CIFAR-10 batches, got {str(folder)!r}")
    names = CIFAR10_TRAIN_FILES if train else ("test_batch",)
    files = [folder / n for n in names if (folder / n).is_file()]
    if not files:
        raise DPValueError(f"folder {str(folder)!r} has none of {', '.join(names)}")
    parts = [_read_batch(p) for p in files]
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    if not normalize:
        return X, y
    mean = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)[None, :, None, None]
    std = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)[None, :, None, None]
    return ((X.astype(np.float32) / 255.0 - mean) / std).astype(np.float32), y


def write_cifar10_like(folder: str | Path, n_per_batch: int = 10, seed: int = 0, batches: int = 1) -> Path:
    """Write ``batches`` training files and a test file in the CIFAR-10 python format (random pixels)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n = check_positive_int("n_per_batch", n_per_batch)
    for name in list(CIFAR10_TRAIN_FILES[: check_positive_int("batches", batches)]) + ["test_batch"]:
        d = {b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8), b"labels": rng.integers(0, 10, size=n).tolist()}
        with open(folder / name, "wb") as fh:
            pickle.dump(d, fh)
    return folder


def synthetic_images(n: int, n_classes: int = 10, separation: float = 2.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` standardised 3x32x32 "images": label y uniform on ``n_classes``; x = pattern_y + N(0, I), with smooth
    random class patterns (8x8 noise upsampled 4x, so convolutions have spatial structure to find) scaled so that
    every pattern has norm ``separation / sqrt(2)``. Returns (X float32 (n, 3, 32, 32), y int64)."""
    n = check_positive_int("n", n)
    k = check_positive_int("n_classes", n_classes)
    if k < 2:
        raise DPValueError(f"n_classes must be >= 2, got {k}")
    sep = check_positive("separation", separation)
    rng = np.random.default_rng(seed)
    coarse = rng.standard_normal((k, 3, 8, 8))
    patterns = np.repeat(np.repeat(coarse, 4, axis=2), 4, axis=3).reshape(k, -1)
    patterns *= (sep / math.sqrt(2)) / np.linalg.norm(patterns, axis=1, keepdims=True)
    y = rng.integers(0, k, size=n)
    X = (patterns[y] + rng.standard_normal((n, 3 * 32 * 32))).reshape(n, 3, 32, 32)
    return X.astype(np.float32), y.astype(np.int64)


def image_data(folder: str | Path | None, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    """The first ``n`` CIFAR-10 training images of ``folder`` if it is a CIFAR-10 python folder, else ``n``
    :func:`synthetic_images`. Returns ``(X, y, source)`` with ``source`` naming what was used, so a run can report
    honestly which data it trained on."""
    n = check_positive_int("n", n)
    if folder is not None and Path(folder).is_dir() and any((Path(folder) / f).is_file() for f in CIFAR10_TRAIN_FILES):
        X, y = load_cifar10(folder)
        if n > len(X):
            raise DPValueError(f"n must be <= the {len(X)} CIFAR-10 training images in {str(folder)!r}, got {n}")
        return X[:n], y[:n], f"cifar10:{folder}"
    X, y = synthetic_images(n, seed=seed)
    return X, y, "synthetic-images"
