"""GPU peaks by the names torch reports, and the roofline read against them (hand-computed)."""

import pytest

from tui.model.gpu_peaks import COMPUTE, MEMORY, PEAKS, Peak, peak_for, roofline


@pytest.mark.parametrize(
    "reported,entry",
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA GH200 480GB", "GH200 (96 GB HBM3)"),
        ("NVIDIA GH200 144G HBM3e", "GH200 (144 GB HBM3e)"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada Generation"),
        ("nvidia h100 pcie", "H100 PCIe"),  # any case
    ],
)
def test_a_reported_name_finds_its_entry(reported, entry):
    assert peak_for(reported).name == entry


@pytest.mark.parametrize(
    "reported", ["", "NVIDIA A10G", "Tesla V100-SXM2-16GB", "Quadro RTX 6000", "AMD Instinct MI300X", "cpu"]
)
def test_an_unknown_gpu_has_no_peak(reported):
    """Tokens match whole: an A10G is not an A10, a Turing RTX 6000 not the Ada one."""
    assert peak_for(reported) is None


def test_every_entry_is_dense_and_names_its_source():
    for p in PEAKS:
        assert p.source and p.bandwidth_tbs > 0 and p.fp16_tflops > 0
        assert p.fp8_tflops is None or p.fp8_tflops >= p.fp16_tflops
    names = [p.tokens for p in PEAKS]
    assert len(set(names)) == len(names)  # no two entries claim the same name
    assert peak_for("NVIDIA H100 80GB HBM3").fp16_tflops == 989.5  # 1,979 with sparsity, halved
    assert peak_for("NVIDIA A100-SXM4-80GB").fp8_tflops is None


PEAK = Peak("test GPU", ("test",), fp16_tflops=1000.0, fp8_tflops=2000.0, bandwidth_tbs=4.0, source="made up")


def test_a_compute_bound_point_is_read_against_the_flops_peak():
    # 1e12 FLOPs over 1e9 bytes: 1000 FLOP/byte, above the ridge 1000 / 4 = 250
    line = roofline(1e12, 1e9, "bf16", PEAK, tflops=600.0, bandwidth_gbs=600.0)
    assert line.intensity == 1000.0 and line.ridge == 250.0 and line.bound == COMPUTE
    assert line.attainable_tflops == 1000.0 and line.share == pytest.approx(0.6)


def test_a_memory_bound_point_is_read_against_the_bandwidth():
    # a decode step: 2e9 FLOPs over 1e9 bytes is 2 FLOP/byte, far below the ridge; 3 TB/s of 4
    line = roofline(2e9, 1e9, "fp16", PEAK, tflops=6.0, bandwidth_gbs=3000.0)
    assert line.intensity == 2.0 and line.bound == MEMORY
    assert line.attainable_tflops == pytest.approx(8.0)  # 2 FLOP/byte x 4 TB/s
    assert line.share == pytest.approx(0.75)


def test_fp8_uses_its_own_peak_and_a_gpu_without_fp8_has_no_roofline():
    line = roofline(1e12, 1e9, "fp8_e4m3", PEAK, tflops=1000.0)
    assert line.ridge == 500.0 and line.bound == COMPUTE and line.share == pytest.approx(0.5)
    assert roofline(1e12, 1e9, "fp8", peak_for("NVIDIA A100-SXM4-80GB")) is None


def test_the_ridge_point_itself_is_compute_bound_and_nothing_measured_has_no_share():
    line = roofline(250e9, 1e9, "fp16", PEAK)
    assert line.bound == COMPUTE and line.share is None
    assert roofline(0, 1e9, "fp16", PEAK) is None
    with pytest.raises(ValueError, match="fp32"):
        roofline(1e12, 1e9, "fp32", PEAK)
