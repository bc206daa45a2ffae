"""benchmarks.common: what a result line records of its machine, and the precision a training
command is given and trains in."""

from __future__ import annotations

from unittest import mock

import torch

from benchmarks import common, report


def test_a_result_records_the_cpus_vector_instructions_and_bfloat16() -> None:
    """The instructions PyTorch's kernels use and whether ``trainer.precision=auto`` finds bfloat16,
    as the CPU reports them (here and on a CPU said to have neither)."""
    env = common.environment(torch.device("cpu"), 2, "python -m benchmarks.x")
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["cpu_bf16"] == bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    with mock.patch("torch.cpu._is_avx512_bf16_supported", return_value=False), \
            mock.patch("torch.cpu._is_amx_tile_supported", return_value=False), \
            mock.patch("torch.backends.cpu.get_cpu_capability", return_value="AVX2"):
        env = common.environment(torch.device("cpu"), 2, "python -m benchmarks.x")
    assert (env["cpu_capability"], env["cpu_bf16"]) == ("AVX2", False)


def test_the_precision_setting_is_the_last_override_or_auto_and_auto_follows_the_cpu() -> None:
    assert common.precision_setting(["model=transformer_mini"]) == "auto"
    assert common.precision_setting(["trainer.precision=bf16-mixed", "trainer.precision=32-true"]) == "32-true"
    assert common.cli_precision(["trainer.precision=32-true"], "cpu") == "32-true"
    for bf16, precision in ((True, "bf16-mixed"), (False, "32-true")):
        with mock.patch("torch.cpu._is_avx512_bf16_supported", return_value=bf16), \
                mock.patch("torch.cpu._is_amx_tile_supported", return_value=False):
            assert common.cli_precision([], "cpu") == precision


def test_a_results_source_line_names_the_machine_as_every_page_does() -> None:
    """Two machines that report one CPU name are told apart by the instructions their lines recorded,
    trademarks are dropped, and the source lines under a table name the machine as the tables do."""
    env = {"command": "python -m benchmarks.x", "time": "t", "torch": "2", "device": "cpu", "cpu": "AMD EPYC",
           "cpu_count": 2, "threads": 2}
    assert report.machine_name({"cpu": "AMD EPYC", "cpu_capability": "AVX2"}) == "AMD EPYC (AVX2)"
    assert report.machine_name({"cpu": "Intel(R) Xeon(R) Processor"}) == "Intel Xeon"
    assert "device cpu on a 2-core AMD EPYC, threads: 2." in report.environment_line({"env": env})
    line = report.environment_line({"env": {**env, "cpu_capability": "AVX2"}})
    assert "device cpu on a 2-core AMD EPYC (AVX2), threads: 2." in line
    assert report.machine({**env, "cpu_capability": "AVX2"}) in line
