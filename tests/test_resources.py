"""dputils.resources: the memory limit sees a container's cgroup limit as well as physical memory.

Every test builds a fake /proc and /sys/fs/cgroup under tmp_path and points the module's paths at it, so the
results do not depend on the machine running the tests. Expected limits are written out from the fake files
(0.6 x the smaller of MemTotal and the cgroup limit), never read back from the code under test.
"""

from __future__ import annotations

import math
import os

import pytest

from dputils import resources
from dputils.errors import DPValueError
from dputils.matrix.factorizations import check_strategy_cost

GIB = 1024**3
HOST = 64 * GIB  # the fake machine's MemTotal
V1_UNLIMITED = 9223372036854771712  # what cgroup v1 writes for "no limit" (2^63 - 4096)


class FakeSystem:
    """A fake /proc/meminfo, /proc/self/cgroup and cgroup tree under one folder."""

    def __init__(self, root, monkeypatch):
        self.root = root
        self.meminfo = root / "proc" / "meminfo"
        self.self_cgroup = root / "proc" / "self" / "cgroup"
        self.cgroup_root = root / "sys" / "fs" / "cgroup"
        self.self_cgroup.parent.mkdir(parents=True)
        self.cgroup_root.mkdir(parents=True)
        self.write_meminfo(HOST)
        monkeypatch.delenv("DPUTILS_MAX_MEMORY_GB", raising=False)
        monkeypatch.setattr(resources, "PROC_MEMINFO", str(self.meminfo))
        monkeypatch.setattr(resources, "PROC_SELF_CGROUP", str(self.self_cgroup))
        monkeypatch.setattr(resources, "CGROUP_ROOT", str(self.cgroup_root))

    def write_meminfo(self, total_bytes):
        self.meminfo.write_text(f"MemTotal:       {total_bytes // 1024} kB\nMemFree:         1024 kB\n")

    def cgroups(self, *lines):
        self.self_cgroup.write_text("".join(line + "\n" for line in lines))

    def limit_file(self, relpath, value):
        f = self.cgroup_root / relpath
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"{value}\n")
        return f


@pytest.fixture
def fake(tmp_path, monkeypatch):
    return FakeSystem(tmp_path, monkeypatch)


def _expect(limit, total, source, path=None):
    assert limit.total == total
    assert limit.bytes == pytest.approx(0.6 * total, rel=1e-15)
    assert limit.source == source
    if path is not None:
        assert limit.path == str(path)


def test_no_cgroup_files_means_physical_memory(fake):
    # /proc/self/cgroup missing altogether
    _expect(resources.memory_limit(), HOST, "physical", fake.meminfo)


def test_v2_limit_below_host_memory_is_used(fake):
    fake.cgroups("0::/")
    f = fake.limit_file("memory.max", 2 * GIB)
    _expect(resources.memory_limit(), 2 * GIB, "cgroup", f)
    assert resources.available_memory_bytes() == pytest.approx(0.6 * 2 * GIB, rel=1e-15)


def test_v2_max_means_no_limit(fake):
    fake.cgroups("0::/")
    fake.limit_file("memory.max", "max")
    _expect(resources.memory_limit(), HOST, "physical")


def test_cgroup_limit_above_host_memory_keeps_host_memory(fake):
    fake.cgroups("0::/")
    fake.limit_file("memory.max", 100 * GIB)
    _expect(resources.memory_limit(), HOST, "physical")


@pytest.mark.parametrize("huge", [2**60, V1_UNLIMITED, 2**64])
def test_absurdly_large_limits_mean_no_limit_even_without_meminfo(fake, huge):
    # with meminfo unreadable, an 'unlimited' cgroup value must not become the limit
    fake.meminfo.unlink()
    fake.cgroups("0::/")
    fake.limit_file("memory.max", huge)
    assert resources.cgroup_memory_limit() is None
    lim = resources.memory_limit()
    assert lim.source == "physical"
    assert lim.total == float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def test_v1_memory_controller_limit(fake):
    fake.cgroups("12:pids:/docker/abc", "4:memory:/docker/abc", "0::/")
    fake.limit_file("memory/memory.limit_in_bytes", V1_UNLIMITED)
    fake.limit_file("memory/docker/memory.limit_in_bytes", V1_UNLIMITED)
    f = fake.limit_file("memory/docker/abc/memory.limit_in_bytes", 3 * GIB)
    _expect(resources.memory_limit(), 3 * GIB, "cgroup", f)


def test_v1_controller_listed_with_others(fake):
    fake.cgroups("7:cpuacct,memory:/job")
    f = fake.limit_file("memory/job/memory.limit_in_bytes", GIB)
    _expect(resources.memory_limit(), GIB, "cgroup", f)


def test_v1_unlimited_means_physical_memory(fake):
    # this is what the development machine itself shows: a v1 memory cgroup without a limit
    fake.cgroups("4:memory:/process_api/2e37", "0::/")
    fake.limit_file("memory/memory.limit_in_bytes", V1_UNLIMITED)
    fake.limit_file("memory/process_api/2e37/memory.limit_in_bytes", V1_UNLIMITED)
    assert resources.cgroup_memory_limit() is None
    _expect(resources.memory_limit(), HOST, "physical")


def test_nested_v2_path_parent_limit_binds_the_child(fake):
    fake.cgroups("0::/kubepods/pod1/ctr")
    fake.limit_file("kubepods/memory.max", 8 * GIB)
    f = fake.limit_file("kubepods/pod1/memory.max", 3 * GIB)
    fake.limit_file("kubepods/pod1/ctr/memory.max", "max")
    _expect(resources.memory_limit(), 3 * GIB, "cgroup", f)


def test_nested_v2_path_child_limit_tighter_than_parent(fake):
    fake.cgroups("0::/kubepods/pod1/ctr")
    fake.limit_file("kubepods/pod1/memory.max", 3 * GIB)
    f = fake.limit_file("kubepods/pod1/ctr/memory.max", GIB // 2)
    _expect(resources.memory_limit(), GIB // 2, "cgroup", f)


def test_host_path_absent_under_the_mount_reads_the_mount_root(fake):
    # a container without its own cgroup namespace: /proc/self/cgroup names the host's path, the mount is
    # the container's own cgroup
    fake.cgroups("4:memory:/docker/0123abcd")
    f = fake.limit_file("memory/memory.limit_in_bytes", 2 * GIB)
    _expect(resources.memory_limit(), 2 * GIB, "cgroup", f)


def test_hybrid_v1_and_v2_take_the_smaller(fake):
    fake.cgroups("4:memory:/a", "0::/b")
    fake.limit_file("memory/a/memory.limit_in_bytes", 5 * GIB)
    f = fake.limit_file("b/memory.max", 4 * GIB)
    _expect(resources.memory_limit(), 4 * GIB, "cgroup", f)


@pytest.mark.parametrize(
    "breakage", ["directory", "garbage", "empty", "negative", "no_self_cgroup", "garbage_self_cgroup"]
)
def test_unreadable_cgroup_files_fall_back_to_meminfo(fake, breakage):
    fake.cgroups("0::/")
    if breakage == "directory":  # open() fails with IsADirectoryError (chmod would not stop root)
        (fake.cgroup_root / "memory.max").mkdir()
    elif breakage == "garbage":
        fake.limit_file("memory.max", "lots")
    elif breakage == "empty":
        fake.limit_file("memory.max", "")
    elif breakage == "negative":
        fake.limit_file("memory.max", -5)
    elif breakage == "no_self_cgroup":
        fake.limit_file("memory.max", GIB)
        fake.self_cgroup.unlink()
    else:
        fake.limit_file("memory.max", GIB)
        fake.self_cgroup.write_bytes(b"\xff\xfe not a cgroup file\n::\n")
    _expect(resources.memory_limit(), HOST, "physical", fake.meminfo)


def test_unreadable_meminfo_with_a_container_limit(fake):
    fake.meminfo.unlink()
    fake.cgroups("0::/")
    f = fake.limit_file("memory.max", GIB)
    _expect(resources.memory_limit(), GIB, "cgroup", f)


def test_paths_as_arguments(tmp_path, monkeypatch):
    monkeypatch.delenv("DPUTILS_MAX_MEMORY_GB", raising=False)
    (tmp_path / "meminfo").write_text(f"MemTotal: {16 * GIB // 1024} kB\n")
    (tmp_path / "cgroup").write_text("0::/x\n")
    (tmp_path / "fs" / "x").mkdir(parents=True)
    (tmp_path / "fs" / "x" / "memory.max").write_text(str(GIB))
    lim = resources.memory_limit(str(tmp_path / "meminfo"), str(tmp_path / "cgroup"), str(tmp_path / "fs"))
    _expect(lim, GIB, "cgroup", tmp_path / "fs" / "x" / "memory.max")
    assert resources.cgroup_memory_limit(str(tmp_path / "cgroup"), str(tmp_path / "fs")) == (
        float(GIB),
        str(tmp_path / "fs" / "x" / "memory.max"),
    )
    assert resources.physical_memory_bytes(str(tmp_path / "meminfo")) == (16.0 * GIB, str(tmp_path / "meminfo"))


def test_environment_override_beats_the_container(fake, monkeypatch):
    fake.cgroups("0::/")
    fake.limit_file("memory.max", GIB)
    monkeypatch.setenv("DPUTILS_MAX_MEMORY_GB", "5")
    lim = resources.memory_limit()
    assert (lim.bytes, lim.source) == (5.0 * GIB, "env")
    with pytest.raises(DPValueError, match="DPUTILS_MAX_MEMORY_GB"):
        resources.check_memory("n", 6 * GIB)


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "inf", "nan"])
def test_environment_override_refuses_bad_values(monkeypatch, bad):
    monkeypatch.setenv("DPUTILS_MAX_MEMORY_GB", bad)
    with pytest.raises(DPValueError, match="DPUTILS_MAX_MEMORY_GB"):
        resources.available_memory_bytes()


def test_job_that_fits_the_host_but_not_the_container_is_refused(fake):
    need = 1.5 * GIB  # under 0.6 x 64 GiB, over 0.6 x 2 GiB = 1.2 GiB
    resources.check_memory("grid", need, "the grid")  # no container: accepted
    fake.cgroups("0::/")
    f = fake.limit_file("memory.max", 2 * GIB)
    with pytest.raises(DPValueError) as err:
        resources.check_memory("grid", need, "the grid", hint="use a coarser grid")
    msg = str(err.value)
    assert msg.startswith("grid: the grid would need 1.5 GiB, over this container's limit of 1.2 GiB")
    assert "container memory limit 2 GiB" in msg and str(f) in msg
    assert msg.endswith("; use a coarser grid")
    resources.check_memory("grid", GIB, "the grid")  # 1 GiB fits the container


def test_physical_limit_message_names_the_machine(fake):
    with pytest.raises(DPValueError, match=r"^n: would need 40 GiB, over this machine's limit of 38.4 GiB$"):
        resources.check_memory("n", 40 * GIB)


def test_nan_estimate_is_refused(fake):
    with pytest.raises(DPValueError, match="^n: "):
        resources.check_memory("n", math.nan)


def test_matrix_strategy_guard_sees_the_container(fake):
    # N = 10000: the dense strategy needs 5 N x N float64 arrays = 4e9 bytes (3.7 GiB): fits 0.6 x 64 GiB,
    # not 0.6 x 2 GiB; the hint's largest N is floor(sqrt(0.6 * 2 GiB / 40 bytes)) = 5675
    check_strategy_cost("bsr", 1, 10000)
    fake.cgroups("0::/")
    fake.limit_file("memory.max", 2 * GIB)
    with pytest.raises(DPValueError, match=r"^batches: .*this container's limit of 1.2 GiB") as err:
        check_strategy_cost("bsr", 1, 10000)
    assert math.isqrt(int(0.6 * 2 * GIB / 40)) == 5675
    assert "the largest feasible N is about 5675" in str(err.value)
